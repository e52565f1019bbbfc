package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogTicks(t *testing.T) {
	assert.Equal(t, []float64{1e3, 1e4, 1e5, 1e6}, logTicks(1000, 1_000_000))
	assert.Equal(t, []float64{1e3, 1e4}, logTicks(1000, 10_000))
	// Sizes between powers of ten are enclosed by the powers around them.
	assert.Equal(t, []float64{100, 1e3, 1e4, 1e5}, logTicks(500, 20_000))
}

func TestLinearTicks(t *testing.T) {
	assert.Equal(t, []float64{0, 0.5, 1, 1.5}, linearTicks(0, 1.5))
	assert.Equal(t, []float64{0, 0.5, 1, 1.5, 2, 2.5}, linearTicks(0, 2.2))
	assert.Equal(t, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, linearTicks(0, 1))
	assert.Equal(t, []float64{0, 1, 2, 3, 4, 5}, linearTicks(0, 4.4))
	assert.Equal(t, []float64{0, 20, 40, 60}, linearTicks(0, 55))
}

func TestFormatCount(t *testing.T) {
	for v, want := range map[float64]string{1000: "1k", 10_000: "10k", 100_000: "100k", 1_000_000: "1M", 2_500: "2500", 50: "50"} {
		assert.Equal(t, want, formatCount(v), "%v", v)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1k, 10k,100000,1M")
	require.NoError(t, err)
	assert.Equal(t, []int{1000, 10_000, 100_000, 1_000_000}, got)
	_, err = parseSizes("1k,ten")
	assert.Error(t, err)
}

// The scale chart of sample rows is a PNG of the chart's size with every series drawn.
func TestScaleChartPNG(t *testing.T) {
	row := func(size int, page, label, conv time.Duration) scaleRow {
		return scaleRow{size: size, page: percentiles{p50: page}, label: percentiles{p50: label}, conv: percentiles{p50: conv}}
	}
	c := scaleChart([]scaleRow{
		row(1000, 400*time.Microsecond, 900*time.Microsecond, 20*time.Millisecond),
		row(10_000, 420*time.Microsecond, 950*time.Microsecond, 21*time.Millisecond),
		row(100_000, 500*time.Microsecond, 1100*time.Microsecond, 22*time.Millisecond),
		row(1_000_000, 700*time.Microsecond, 1500*time.Microsecond, 26*time.Millisecond),
	})
	require.Len(t, c.series, 3)
	assert.InDelta(t, 1.75, c.series[0].y[3], 1e-9, "the ratio to the first size")

	path := filepath.Join(t.TempDir(), "scale.png")
	require.NoError(t, writePNG(path, c.draw()))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, c.width, c.height), img.Bounds())
	for _, s := range c.series {
		assert.Positive(t, countColor(img, s.color.R, s.color.G, s.color.B), "series %q is drawn", s.name)
	}
	assert.Positive(t, countColor(img, 0, 0, 0), "axes and text are drawn")
}

func countColor(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if uint8(cr>>8) == r && uint8(cg>>8) == g && uint8(cb>>8) == b {
				n++
			}
		}
	}
	return n
}
