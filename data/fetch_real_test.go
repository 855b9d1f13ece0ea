package data_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/internal/datatest"
)

// TestFetchDebianFashionMNIST serves the real Fashion-MNIST files as Debian's
// dataset-fashion-mnist package installs them (recompressed: their MD5s are not the
// publisher's) from a mirror and checks that Fetch accepts them by their content, with
// the catalogue's own fingerprints; then that copies of them already in place are kept.
func TestFetchDebianFashionMNIST(t *testing.T) {
	src := datatest.Dir(t, "fashion-mnist")
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	var progress strings.Builder
	if err := data.Fetch(t.Context(), "fashion-mnist", dir, data.FetchOptions{BaseURL: srv.URL, Progress: &progress}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "saved, decompressed content ok"); n != 4 {
		t.Errorf("%d files accepted by content, want 4:\n%s", n, progress.String())
	}
	// Already present: accepted without the server.
	progress.Reset()
	opts := data.FetchOptions{BaseURL: "http://127.0.0.1:1/", Progress: &progress}
	if err := data.Fetch(t.Context(), "fashion-mnist", dir, opts); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "already present, decompressed content ok"); n != 4 {
		t.Errorf("%d files accepted in place, want 4:\n%s", n, progress.String())
	}
	for _, name := range []string{"train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		a, _ := os.ReadFile(filepath.Join(src, name))
		b, _ := os.ReadFile(filepath.Join(dir, "fashion-mnist", name))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s: the fetched copy differs from the served file", name)
		}
	}
}
