// Package chartcheck reads back the PNG charts kvlens draws, for tests.
package chartcheck

import (
	"image"
	"image/color"
	"image/png"
	"io"
)

// Colours decodes a PNG and returns it with the set of colours its pixels
// use, so a test can ask whether a line of a given colour was drawn.
func Colours(r io.Reader) (image.Image, map[color.RGBA]bool, error) {
	img, err := png.Decode(r)
	if err != nil {
		return nil, nil, err
	}
	drawn := map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			drawn[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)] = true
		}
	}
	return img, drawn, nil
}
