package migrate

import (
	"testing"

	"github.com/tapml/tapml/frontend"
	"github.com/tapml/tapml/internal/testenv"
)

func loadStories(t testing.TB) *frontend.Model {
	t.Helper()
	m, err := frontend.Load(testenv.Model(t, "stories260K.bin"), frontend.Options{Tokenizer: testenv.Model(t, "tok512.bin")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const storiesPrompt = "Once upon a time"
