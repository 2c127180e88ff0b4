package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// policyColors tell the policies apart, one for each of DefaultPolicies in
// its order: ten colours that stay distinct for most kinds of colour
// blindness, the last (kv's) the strongest.
var policyColors = []color.Color{
	color.RGBA{R: 0x9c, G: 0xa3, B: 0xaf, A: 0xff}, // grey
	color.RGBA{R: 0x6b, G: 0x72, B: 0x80, A: 0xff}, // dark grey
	color.RGBA{R: 0x0e, G: 0xa5, B: 0xe9, A: 0xff}, // sky
	color.RGBA{R: 0xd9, G: 0x77, B: 0x06, A: 0xff}, // amber
	color.RGBA{R: 0xf5, G: 0x9e, B: 0x0b, A: 0xff}, // yellow
	color.RGBA{R: 0x92, G: 0x40, B: 0x0e, A: 0xff}, // brown
	color.RGBA{R: 0x7c, G: 0x3a, B: 0xed, A: 0xff}, // violet
	color.RGBA{R: 0x0d, G: 0x94, B: 0x88, A: 0xff}, // teal
	color.RGBA{R: 0xdb, G: 0x27, B: 0x77, A: 0xff}, // pink
	color.RGBA{R: 0x76, G: 0xb9, B: 0x00, A: 0xff}, // green
}

// colorsOf gives each policy its colour: a default policy keeps its own
// in every grid, so a picture of two policies reads as the full grid's
// does; another takes the first colour no policy of the grid has.
func colorsOf(policies []string) []color.Color {
	out := make([]color.Color, len(policies))
	used := make([]bool, len(policyColors))
	for i, p := range policies {
		if j := slices.Index(DefaultPolicies, p); j >= 0 && j < len(policyColors) {
			out[i], used[j] = policyColors[j], true
		}
	}
	next := 0
	for i := range out {
		if out[i] != nil {
			continue
		}
		for next < len(used) && used[next] {
			next++
		}
		if next == len(used) {
			// More policies than colours: the rest cycle, as before.
			out[i] = policyColors[i%len(policyColors)]
			continue
		}
		out[i], used[next] = policyColors[next], true
	}
	return out
}

// Panel size and resolution of the PNG grid.
const (
	chartDPI    = 100
	panelWidth  = 6 * vg.Inch
	panelHeight = 4 * vg.Inch
	chartCols   = 3
)

// WriteChart draws the grid as a PNG: one panel per workload with TTFT
// p95 (mean over the seeds, log scale) against the level, one line per
// policy, and a black ring on each level's winner; the last tile is the
// legend.
func WriteChart(w io.Writer, r *Result) error {
	if err := r.whole(); err != nil {
		return err
	}
	rows := r.rows()
	policies := r.Grid.Policies
	colors := colorsOf(policies)
	n := len(r.Grid.Workloads) + 1
	cols := min(chartCols, n)
	nrows := (n + cols - 1) / cols
	plots := make([][]*plot.Plot, nrows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	legend := plot.New()
	legend.HideAxes()
	legend.Title.Text = "TTFT p95 (ms, log scale) vs level; ring: lowest"
	legend.Legend.Top, legend.Legend.Left = true, true
	legend.Legend.TextStyle.Font.Size = vg.Points(12)
	for k, wl := range r.Grid.Workloads {
		p := plot.New()
		p.Title.Text = wl.Name
		p.X.Label.Text = "level"
		p.Y.Label.Text = "TTFT p95 (ms)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		p.Add(plotter.NewGrid())
		lines := make([]plotter.XYs, len(policies))
		var rings plotter.XYs
		for _, rw := range rows {
			if rw.workload != wl.Name {
				continue
			}
			for i, c := range rw.cells {
				lines[i] = append(lines[i], plotter.XY{X: float64(rw.level), Y: math.Max(c.TTFT().Mean, 1)})
			}
			win := rw.cells[rw.winnerTTFT()]
			rings = append(rings, plotter.XY{X: float64(rw.level), Y: math.Max(win.TTFT().Mean, 1)})
		}
		for i, pts := range lines {
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("bench chart: %s, %s: %w", wl.Name, policies[i], err)
			}
			c := colors[i]
			line.Color, line.Width = c, vg.Points(1.5)
			points.Color, points.Shape, points.Radius = c, draw.CircleGlyph{}, vg.Points(2.5)
			p.Add(line, points)
			if k == 0 {
				legend.Legend.Add(policies[i], line, points)
			}
		}
		if len(rings) > 0 {
			sc, err := plotter.NewScatter(rings)
			if err != nil {
				return fmt.Errorf("bench chart: %s: %w", wl.Name, err)
			}
			sc.Shape, sc.Radius, sc.Color = draw.RingGlyph{}, vg.Points(6), color.Black
			p.Add(sc)
		}
		plots[k/cols][k%cols] = p
	}
	plots[(n-1)/cols][(n-1)%cols] = legend
	c := vgimg.NewWith(vgimg.UseWH(panelWidth*vg.Length(cols), panelHeight*vg.Length(nrows)), vgimg.UseDPI(chartDPI))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("bench chart: write PNG: %w", err)
	}
	return nil
}

// logTicks marks a log axis at every digit times each power of ten, and
// labels those at 1, 2 and 5, or all of them when the axis spans too little
// for two such labels: a panel spanning less than a decade still reads.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for d := 1.0; d < 10; d++ {
			v := d * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if d == 1 || d == 2 || d == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
				labelled++
			}
			ticks = append(ticks, t)
		}
	}
	if labelled < 2 {
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
