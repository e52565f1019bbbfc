package merge

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"testing"
	"time"
)

// benchDoc builds a 20 KB email body with 30 merge fields, in this package's syntax and in
// html/template's, rendering the same output from the same data.
func benchDoc() (ours, theirs string, data Data, tdata map[string]string) {
	data, tdata = Data{}, map[string]string{}
	var a, b strings.Builder
	para := `<p style="margin:0 0 12px;font-family:Arial,sans-serif;color:#333">Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam.</p>` + "\n"
	for i := 0; a.Len() < 20000; i++ {
		a.WriteString(para)
		b.WriteString(para)
		if i < 30 {
			key := fmt.Sprintf("f%02d", i)
			data["subscriber.fields."+key] = fmt.Sprintf("value <%d> & more", i)
			tdata[key] = data["subscriber.fields."+key]
			fmt.Fprintf(&a, "<p>{{ subscriber.fields.%s }}</p>\n", key)
			fmt.Fprintf(&b, "<p>{{ .%s }}</p>\n", key)
		}
	}
	return a.String(), b.String(), data, tdata
}

// BenchmarkRender20KB30Fields renders a 20 KB email with 30 merge fields with this package and
// with html/template.
func BenchmarkRender20KB30Fields(b *testing.B) {
	ours, theirs, data, tdata := benchDoc()
	tpl, errs := Parse(ours)
	if errs != nil {
		b.Fatal(errs)
	}
	ht := template.Must(template.New("x").Parse(theirs))
	// The two engines must produce the same document for the comparison to mean anything.
	var sb strings.Builder
	if err := ht.Execute(&sb, tdata); err != nil {
		b.Fatal(err)
	}
	if got := tpl.Render(data, html.EscapeString); got != strings.ReplaceAll(sb.String(), "&#43;", "+") {
		b.Fatalf("outputs differ:\n%.300s\n---\n%.300s", got, sb.String())
	}
	// Both engines run b.N renders in the same run; the ratio is what to read (machines differ).
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		_ = tpl.Render(data, html.EscapeString)
	}
	oursTook := time.Since(start)
	start = time.Now()
	for range b.N {
		sb.Reset()
		_ = ht.Execute(&sb, tdata)
	}
	theirsTook := time.Since(start)
	b.ReportMetric(float64(b.N)/oursTook.Seconds(), "merge-renders/s")
	b.ReportMetric(float64(b.N)/theirsTook.Seconds(), "html-template-renders/s")
	b.ReportMetric(theirsTook.Seconds()/oursTook.Seconds(), "speedup")
	b.ReportMetric(0, "ns/op") // the two loops' sum would mean nothing
}
