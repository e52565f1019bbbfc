package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A small line chart for the scale bench (docs/scale.png): x on a log scale, y linear from
// 0, a dashed reference line at y = 1, one polyline with markers per series, and a legend.
// Standard library images and x/image's fixed 7x13 font; no plotting library.

type series struct {
	name  string
	color color.RGBA
	y     []float64
}

type chart struct {
	title, xLabel, yLabel string
	x                     []float64 // ascending, positive
	series                []series
	width, height         int
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0x2c, 0xa0, 0x2c, 0xff}, // green
}

var (
	black = color.RGBA{0, 0, 0, 0xff}
	grey  = color.RGBA{0xcc, 0xcc, 0xcc, 0xff}
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// The plot area's margins, in pixels.
const (
	marginLeft   = 70
	marginRight  = 20
	marginTop    = 40
	marginBottom = 60
)

// draw renders the chart.
func (c chart) draw() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, c.width, c.height))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	left, right := marginLeft, c.width-marginRight
	top, bottom := marginTop, c.height-marginBottom

	xs := logTicks(c.x[0], c.x[len(c.x)-1])
	xmin, xmax := math.Log10(xs[0]), math.Log10(xs[len(xs)-1])
	ymax := 0.0
	for _, s := range c.series {
		for _, v := range s.y {
			ymax = max(ymax, v)
		}
	}
	ys := linearTicks(0, max(ymax*1.1, 1.5))
	ytop := ys[len(ys)-1]
	px := func(x float64) int {
		return left + int(math.Round((math.Log10(x)-xmin)/(xmax-xmin)*float64(right-left)))
	}
	py := func(y float64) int { return bottom - int(math.Round(y/ytop*float64(bottom-top))) }

	// Grid and tick labels.
	for _, t := range ys {
		y := py(t)
		line(img, left, y, right, y, grey, 1)
		label := strconv.FormatFloat(t, 'f', -1, 64)
		text(img, left-8-textWidth(label), y+4, label, black)
	}
	for _, t := range xs {
		x := px(t)
		line(img, x, top, x, bottom, grey, 1)
		label := formatCount(t)
		text(img, x-textWidth(label)/2, bottom+18, label, black)
	}
	// The reference: flat is a ratio of 1.
	for x := left; x < right; x += 10 {
		line(img, x, py(1), min(x+5, right), py(1), black, 1)
	}
	// Axes and labels.
	line(img, left, top, left, bottom, black, 1)
	line(img, left, bottom, right, bottom, black, 1)
	text(img, (c.width-textWidth(c.title))/2, 22, c.title, black)
	text(img, (left+right-textWidth(c.xLabel))/2, bottom+45, c.xLabel, black)
	text(img, 8, top-10, c.yLabel, black)

	// Series.
	for _, s := range c.series {
		for i := range s.y {
			x, y := px(c.x[i]), py(s.y[i])
			if i > 0 {
				line(img, px(c.x[i-1]), py(s.y[i-1]), x, y, s.color, 2)
			}
			fill(img, image.Rect(x-3, y-3, x+4, y+4), s.color)
		}
	}
	// Legend, top left inside the plot area.
	lx, ly := left+15, top+15
	for i, s := range c.series {
		y := ly + i*18
		line(img, lx, y, lx+24, y, s.color, 2)
		fill(img, image.Rect(lx+9, y-3, lx+16, y+4), s.color)
		text(img, lx+32, y+4, s.name, black)
	}
	return img
}

// logTicks returns the powers of ten from the largest one at or below lo to the smallest one
// at or above hi.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); ; e++ {
		out = append(out, math.Pow(10, e))
		if out[len(out)-1] >= hi*(1-1e-9) {
			return out
		}
	}
}

// linearTicks returns ticks from lo in steps of 1, 2 or 5 times a power of ten, about five
// of them, the last at or above hi.
func linearTicks(lo, hi float64) []float64 {
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// Rounded to the step's decimals: 3 * 0.2 is 0.6000000000000001.
	scale := math.Pow(10, max(0, -math.Floor(math.Log10(step))))
	var out []float64
	for i := 0; ; i++ {
		t := math.Round((lo+float64(i)*step)*scale) / scale
		out = append(out, t)
		if t >= hi-step*1e-9 {
			return out
		}
	}
}

// formatCount writes 1000 as 1k and 1000000 as 1M.
func formatCount(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return fmt.Sprintf("%.0fM", v/1e6)
	case v >= 1e3 && math.Mod(v, 1e3) == 0:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return font.MeasureString(basicfont.Face7x13, s).Round() }

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

// line draws from (x0, y0) to (x1, y1), w pixels thick (Bresenham with a square pen).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, w int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		for i := range w {
			for j := range w {
				img.SetRGBA(x0+i-w/2, y0+j-w/2, c)
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// writePNG encodes img to path.
func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
