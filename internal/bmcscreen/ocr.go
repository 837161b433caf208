package bmcscreen

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os/exec"
	"strings"
	"unicode"

	xdraw "golang.org/x/image/draw"
)

// OCR: the screen's text, read by Debian's tesseract-ocr (5.3). A
// machine's screen is light text on a dark ground at 8–16 pixels a line
// (a VGA text console, a firmware's menu, vbmcd's sim); tesseract reads
// dark text on a light ground at 20 pixels or more a line best, so the
// screenshot is turned to grey, inverted when its ground is dark, and
// scaled up Scale times (bilinear) before tesseract reads it as one block
// of text (--psm 6). On the sim's 7×13 font, nearest-pixel scaling at 2, 3
// and 4 times misread letters ("va lue=BMLABd2S") that bilinear at 2 read
// right; larger factors read worse with either.

// Scale is how many times a screenshot is enlarged before OCR.
var Scale = 2

// Tesseract is the OCR program.
var Tesseract = "tesseract"

// OCRText returns the text tesseract reads on a PNG screenshot.
func OCRText(ctx context.Context, pngData []byte) (string, error) {
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		return "", fmt.Errorf("the screenshot is not a PNG: %w", err)
	}
	var in bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&in, Prepare(img)); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, Tesseract, "stdin", "stdout", "--psm", "6", "-l", "eng")
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s (Debian's tesseract-ocr; hack/install-deps.sh installs it)", Tesseract, err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// Prepare is what OCRText gives tesseract: img in grey, dark text on a
// light ground, Scale times larger.
func Prepare(img image.Image) *image.Gray {
	g := grey(img)
	s := max(1, Scale)
	if s == 1 {
		return g
	}
	out := image.NewGray(image.Rect(0, 0, g.Rect.Dx()*s, g.Rect.Dy()*s))
	xdraw.BiLinear.Scale(out, out.Rect, g, g.Rect, xdraw.Src, nil)
	return out
}

// grey is img in grey, inverted when its ground is dark.
func grey(img image.Image) *image.Gray {
	b := img.Bounds()
	g := image.NewGray(image.Rect(0, 0, b.Dx(), b.Dy()))
	var sum uint64
	rgba, _ := img.(*image.RGBA) // what PNG screenshots decode to
	for y := range b.Dy() {
		for x := range b.Dx() {
			var v uint8
			if rgba != nil {
				// color.GrayModel's weights, without an interface call a pixel
				p := rgba.Pix[rgba.PixOffset(b.Min.X+x, b.Min.Y+y):]
				v = uint8((19595*uint32(p[0]) + 38470*uint32(p[1]) + 7471*uint32(p[2]) + 1<<15) >> 16)
			} else {
				v = color.GrayModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.Gray).Y
			}
			g.Pix[y*g.Stride+x] = v
			sum += uint64(v)
		}
	}
	if n := uint64(b.Dx() * b.Dy()); n > 0 && sum/n < 128 {
		for i := range g.Pix {
			g.Pix[i] = 255 - g.Pix[i]
		}
	}
	return g
}

// Normalize is how WaitFor compares texts in the serial output: lower
// case, without spaces or line breaks (a terminal wraps lines, OCR splits
// and joins words).
func Normalize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if !unicode.IsSpace(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Fold is how WaitFor compares texts on the screen: Normalize, and the
// letters OCR mistakes for one another in console fonts made one. These
// are not chance misreads but the same one every time: OVMF's font reads
// "DVD-ROM" as "DUD-ROM" and "QM00051" as "QMO0051" at every scale and page
// segmentation tried (1–4 times, --psm 6 and 11, with and without a
// threshold), and the sim's "0001" as "O001".
func Fold(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case 'v':
			return 'u'
		case '0', 'q':
			return 'o'
		case '1', 'i', '|', '!':
			return 'l'
		case '5':
			return 's'
		}
		return r
	}, Normalize(s))
}
