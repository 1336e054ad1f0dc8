package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the module's root, from this folder.
const root = "../.."

// quoteRe finds the README's Go blocks that quote a file of the repository:
// a "<!-- quoted from PATH -->" line right before a ```go block.
var quoteRe = regexp.MustCompile("(?s)<!-- quoted from ([^ ]+) -->\n```go\n(.*?)\n```")

// The README's code compiles: every Go block in it quotes, verbatim, a
// file that the build compiles (and whose tests run it).
func TestReadmeQuotesCompiledCode(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	quotes := quoteRe.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, quotes)
	blocks := strings.Count(string(readme), "```go")
	require.Equal(t, blocks, len(quotes), "every Go block in README.md quotes a compiled file")
	for _, q := range quotes {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(q[1])))
		require.NoError(t, err, "README.md quotes %s", q[1])
		require.True(t, strings.HasSuffix(q[1], ".go") && !strings.HasSuffix(q[1], "_test.go"), q[1])
		require.Contains(t, string(src), q[2], "README.md's quote of %s is not verbatim", q[1])
	}
}
