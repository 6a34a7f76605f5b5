package toolcall

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// readTemplate reads tokenizer/testdata/chat/<name>.jinja.
func readTemplate(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "chat", name+".jinja"))
	require.NoError(t, err)
	return string(src)
}
