package sweep

import (
	"math"
	"testing"
)

// Up to twenty variations each get a colour of their own, and no two colours
// are so alike (RGB distance under 55 of 441) that a reader would take one line
// for another; the twenty-first repeats the first colour with another dash.
func TestStyleColoursDistinct(t *testing.T) {
	const n = 20
	rgb := func(i int) [3]float64 {
		line, glyph := style(i)
		r, g, b, _ := line.Color.RGBA()
		gr, gg, gb, _ := glyph.Color.RGBA()
		if r != gr || g != gg || b != gb {
			t.Fatalf("variation %d: line and marker colours differ", i)
		}
		return [3]float64{float64(r >> 8), float64(g >> 8), float64(b >> 8)}
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a, b := rgb(i), rgb(j)
			d := math.Sqrt((a[0]-b[0])*(a[0]-b[0]) + (a[1]-b[1])*(a[1]-b[1]) + (a[2]-b[2])*(a[2]-b[2]))
			if d < 55 {
				t.Errorf("variations %d and %d: colours %v and %v only %.0f apart", i, j, a, b, d)
			}
		}
	}
	er, eg, eb, _ := stripEdgeColour.RGBA()
	edge := [3]float64{float64(er >> 8), float64(eg >> 8), float64(eb >> 8)}
	for i := 0; i < n; i++ {
		a := rgb(i)
		if d := math.Sqrt((a[0]-edge[0])*(a[0]-edge[0]) + (a[1]-edge[1])*(a[1]-edge[1]) + (a[2]-edge[2])*(a[2]-edge[2])); d < 55 {
			t.Errorf("variation %d: colour %v only %.0f from the strip's edge line %v", i, a, d, edge)
		}
	}
	if rgb(n) != rgb(0) {
		t.Errorf("variation %d: colour %v, want the first again %v", n, rgb(n), rgb(0))
	}
	l0, _ := style(0)
	ln, _ := style(n)
	if len(l0.Dashes) == len(ln.Dashes) {
		t.Errorf("variation %d repeats variation 0's colour with the same dash pattern %v", n, ln.Dashes)
	}
}
