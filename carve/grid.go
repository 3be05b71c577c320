package carve

import (
	"fmt"
	"strings"
)

// Grid says where marked elements of a tensor sit (elements out of
// tolerance, elements that differ from run to run). The tensor is viewed
// as planes of rows × cols: cols is the last dim, rows the one before, and
// planes every dim before that (a [N, C, H, W] activation is N·C planes of
// H × W). Bugs in indexing or barriers leave shapes there: a band of rows,
// a column stripe, whole workgroup tiles.
type Grid struct {
	Shape              []int
	Planes, Rows, Cols int
	Marked, Total      int
	// The bounding box of the marked elements (valid when Marked > 0).
	FirstPlane, LastPlane int
	FirstRow, LastRow     int
	FirstCol, LastCol     int
	// Tiles: the marked elements fall in TilesHit of the Tiles aligned
	// Tile × Tile tiles of a plane (over all planes), and FullTiles of
	// those are marked entirely: a workgroup-shaped error.
	Tile, Tiles, TilesHit, FullTiles int
	// Heat is the largest weight of the marked elements in each cell of a
	// coarse view of rows × cols (at most HeatCells cells a side; every
	// plane folded in), row-major; HeatRows × HeatCols cells.
	Heat               []float64
	HeatRows, HeatCols int
}

// HeatCells bounds the cells of a side of a Grid's heat map.
const HeatCells = 64

// gridTile is the tile edge Grid counts: the workgroup tiles of the
// generated kernels are 8 to 64 elements; 16 separates them well.
const gridTile = 16

// Locate finds the elements of a tensor of shape for which weight returns
// a positive value (its size: an error ratio, a spread) and describes where
// they are.
func Locate(shape []int, weight func(i int) float64) Grid {
	g := Grid{Shape: shape, Planes: 1, Rows: 1, Cols: 1, Tile: gridTile}
	switch r := len(shape); {
	case r >= 2:
		g.Rows, g.Cols = shape[r-2], shape[r-1]
		for _, d := range shape[:r-2] {
			g.Planes *= d
		}
	case r == 1:
		g.Cols = shape[0]
	}
	g.Total = g.Planes * g.Rows * g.Cols
	g.HeatRows, g.HeatCols = min(g.Rows, HeatCells), min(g.Cols, HeatCells)
	if g.Total == 0 {
		return g
	}
	g.Heat = make([]float64, g.HeatRows*g.HeatCols)
	tilesR, tilesC := (g.Rows+gridTile-1)/gridTile, (g.Cols+gridTile-1)/gridTile
	g.Tiles = g.Planes * tilesR * tilesC
	hits := make([]int, g.Tiles)
	for i := 0; i < g.Total; i++ {
		w := weight(i)
		if !(w > 0) && w == w { // NaN counts as marked
			continue
		}
		p, rc := i/(g.Rows*g.Cols), i%(g.Rows*g.Cols)
		row, col := rc/g.Cols, rc%g.Cols
		if g.Marked == 0 {
			g.FirstPlane, g.LastPlane, g.FirstRow, g.LastRow, g.FirstCol, g.LastCol = p, p, row, row, col, col
		}
		g.Marked++
		g.FirstPlane, g.LastPlane = min(g.FirstPlane, p), max(g.LastPlane, p)
		g.FirstRow, g.LastRow = min(g.FirstRow, row), max(g.LastRow, row)
		g.FirstCol, g.LastCol = min(g.FirstCol, col), max(g.LastCol, col)
		cell := (row*g.HeatRows/g.Rows)*g.HeatCols + col*g.HeatCols/g.Cols
		if w != w || w > g.Heat[cell] {
			g.Heat[cell] = w
		}
		hits[(p*tilesR+row/gridTile)*tilesC+col/gridTile]++
	}
	for t, n := range hits {
		if n == 0 {
			continue
		}
		g.TilesHit++
		tr, tc := (t/tilesC)%tilesR, t%tilesC
		h := min(gridTile, g.Rows-tr*gridTile)
		w := min(gridTile, g.Cols-tc*gridTile)
		if n == h*w {
			g.FullTiles++
		}
	}
	return g
}

// String describes where the marked elements are, in one line.
func (g Grid) String() string {
	if g.Marked == 0 {
		return fmt.Sprintf("none of %d elements", g.Total)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d elements", g.Marked, g.Total)
	if g.Planes > 1 {
		fmt.Fprintf(&b, "; planes %s of %d", span(g.FirstPlane, g.LastPlane), g.Planes)
	}
	if g.Rows > 1 {
		fmt.Fprintf(&b, "; rows %s of %d", span(g.FirstRow, g.LastRow), g.Rows)
	}
	fmt.Fprintf(&b, "; cols %s of %d", span(g.FirstCol, g.LastCol), g.Cols)
	if g.Tiles > 1 {
		fmt.Fprintf(&b, "; in %d of %d %d×%d tiles", g.TilesHit, g.Tiles, g.Tile, g.Tile)
		if g.FullTiles > 0 {
			fmt.Fprintf(&b, " (%d entirely)", g.FullTiles)
		}
	}
	return b.String()
}

func span(a, b int) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}
