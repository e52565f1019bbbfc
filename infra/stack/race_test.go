//go:build race

package stack_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// closeJSII under the race detector does not call jsii.Close: jsii-runtime-go v1.139.0 reads
// its `closed` flag outside its lock while the goroutine that waits for the node process
// closes it too, which the detector reports, failing the package. The node process exits on
// its own when the test binary's pipes close; what Close would also have done is remove the
// directory the runtime was unpacked into, found here through the node child's command line.
func closeJSII() {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := strconv.Itoa(os.Getpid())
	for _, stat := range stats {
		b, _ := os.ReadFile(stat)
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(stat), "cmdline"))
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			for dir := arg; dir != "/" && dir != "." && dir != ""; dir = filepath.Dir(dir) {
				if isRuntimeDir(filepath.Base(dir)) {
					os.RemoveAll(dir)
					break
				}
			}
		}
	}
}

// isRuntimeDir reports whether name is one of jsii's "jsii-runtime.<digits>" directories
// (its script, jsii-runtime.js, is not).
func isRuntimeDir(name string) bool {
	n, ok := strings.CutPrefix(name, "jsii-runtime.")
	_, err := strconv.ParseUint(n, 10, 64)
	return ok && err == nil
}
