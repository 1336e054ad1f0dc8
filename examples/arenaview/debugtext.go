package main

import (
	"bytes"
	_ "embed"
	"image"
	_ "image/png"

	"github.com/hajimehoshi/ebiten/v2"
)

// debugfont.png is Ebitengine's debug-print glyph sheet (ebitenutil/text.png,
// Copyright 2014 Hajime Hoshi, Apache License 2.0): 6×16 pixel cells of U+0000 to
// U+00FF. The overlay draws it itself rather than with ebitenutil.DebugPrintAt, whose
// package also brings net/http (and crypto/tls) into the browser build: 2.5 MB of
// WebAssembly less.
//
//go:embed debugfont.png
var debugFontPNG []byte

// debugFont draws text with the glyph sheet.
type debugFont struct {
	sheet  *ebiten.Image
	glyphs map[rune]*ebiten.Image
}

func newDebugFont() *debugFont {
	img, _, err := image.Decode(bytes.NewReader(debugFontPNG))
	if err != nil {
		panic(err) // (embedded, checked by the tests)
	}
	return &debugFont{sheet: ebiten.NewImageFromImage(img), glyphs: map[rune]*ebiten.Image{}}
}

// drawAt draws s on dst with its top-left corner at (x, y); '\n' starts a new line.
// Runes above U+00FF are skipped.
func (f *debugFont) drawAt(dst *ebiten.Image, s string, x, y int) {
	const cw, ch = 6, 16
	perRow := f.sheet.Bounds().Dx() / cw
	var op ebiten.DrawImageOptions
	cx, cy := 0, 0
	for _, r := range s {
		if r == '\n' {
			cx, cy = 0, cy+ch
			continue
		}
		if r > 0xff {
			continue
		}
		g, ok := f.glyphs[r]
		if !ok {
			sx, sy := int(r)%perRow*cw, int(r)/perRow*ch
			g = f.sheet.SubImage(image.Rect(sx, sy, sx+cw, sy+ch)).(*ebiten.Image)
			f.glyphs[r] = g
		}
		op.GeoM.Reset()
		op.GeoM.Translate(float64(x+cx+1), float64(y+cy))
		dst.DrawImage(g, &op)
		cx += cw
	}
}
