package baselines

import (
	"fmt"
	"image/color"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// modeColors are the chart's line colours, in mode order: the baseline grey,
// the compared mode green, as on the dashboard.
var modeColors = []color.Color{
	color.RGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0xff},
	color.RGBA{R: 0x76, G: 0xb9, B: 0x00, A: 0xff},
	color.RGBA{R: 0x25, G: 0x63, B: 0xeb, A: 0xff},
	color.RGBA{R: 0xd9, G: 0x77, B: 0x06, A: 0xff},
}

// wholeTicks are gonum's default ticks labelled in whole numbers: a chart
// of milliseconds has no use for "750.00".
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
}

// chartDPI and the chart size give a 16:9 PNG of 1500×844 pixels, for slides.
const chartDPI = 150

var chartWidth, chartHeight = 10 * vg.Inch, 5.625 * vg.Inch

// WriteChart draws TTFT p95 against concurrency, one line per mode, with the
// SLO's TTFT as a dashed red line, and writes it to w as a PNG.
func WriteChart(w io.Writer, s *Set, slo SLO) error {
	p := plot.New()
	p.Title.Text = "TTFT p95 vs concurrency — " + s.Name
	p.X.Label.Text = "Concurrent conversations"
	p.Y.Label.Text = "TTFT p95 (ms)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for i, mode := range s.Modes() {
		curve := s.Curve(mode)
		pts := make(plotter.XYs, len(curve))
		for j, l := range curve {
			pts[j] = plotter.XY{X: float64(l.Concurrency), Y: l.TTFTP95}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", mode, err)
		}
		c := modeColors[i%len(modeColors)]
		line.Color, line.Width = c, vg.Points(2)
		points.Color, points.Shape = c, draw.CircleGlyph{}
		p.Add(line, points)
		short, long := Label(mode)
		name := fmt.Sprintf("%s (%s)", long, short)
		if strings.Contains(long, short) {
			name = long // "KV cache-aware (Dynamo 0.9 cost)", not "… (Dynamo)" after it
		}
		p.Legend.Add(name, line, points)
	}
	top := 0.0 // the highest point drawn, ms
	for _, mode := range s.Modes() {
		for _, l := range s.Curve(mode) {
			top = max(top, l.TTFTP95)
		}
	}
	if slo.TTFT > 0 {
		ms := float64(slo.TTFT) / float64(time.Millisecond)
		top = max(top, ms)
		cs := s.Concurrencies()
		lo, hi := float64(cs[0]), float64(cs[len(cs)-1])
		if lo == hi {
			lo, hi = lo-10, hi+10
		}
		line, err := plotter.NewLine(plotter.XYs{{X: lo, Y: ms}, {X: hi, Y: ms}})
		if err != nil {
			return fmt.Errorf("chart: SLO line: %w", err)
		}
		line.Color = color.RGBA{R: 0xdc, G: 0x26, B: 0x26, A: 0xff}
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("SLO: TTFT ≤ %d ms", slo.TTFT.Milliseconds()), line)
	}
	// The legend sits in the plot's top left corner: leave it a band above
	// the highest point, so that no line runs under it. An entry takes
	// about a 20th of the plot's height.
	entries := len(s.Modes())
	if slo.TTFT > 0 {
		entries++
	}
	p.Y.Max = top / (1 - min(0.5, 0.05*float64(entries)+0.03))
	// Whole milliseconds, and a tick at each level measured.
	p.Y.Tick.Marker = wholeTicks{}
	if cs := s.Concurrencies(); len(cs) <= 12 {
		var ticks []plot.Tick
		for _, c := range cs {
			ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))}
	p.Draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("chart: write PNG: %w", err)
	}
	return nil
}
