package carve

import (
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressBar returns a progress callback that draws a bar on f when f is
// a terminal, and nil (no progress shown) otherwise, so logs and CI output
// stay clean.
func ProgressBar(f *os.File, description string) func(done, total int) {
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(f),
				progressbar.OptionSetDescription(description),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100_000_000),
				progressbar.OptionClearOnFinish(),
			)
		}
		bar.ChangeMax(total)
		_ = bar.Set(done)
		if done >= total {
			_ = bar.Finish()
		}
	}
}
