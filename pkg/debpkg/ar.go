package debpkg

import (
	"fmt"
	"io"
)

// arWriter writes the common ar format deb(5) wants: a global header, then
// members with 60-byte headers (owner 0:0, mode 100644, the given mtime),
// each padded to an even length with a newline.
type arWriter struct {
	w     io.Writer
	mtime int64
	err   error
}

func (a *arWriter) write(b []byte) {
	if a.err == nil {
		_, a.err = a.w.Write(b)
	}
}

func (a *arWriter) header() { a.write([]byte("!<arch>\n")) }

func (a *arWriter) member(name string, body []byte) {
	if len(name) > 16 {
		a.err = fmt.Errorf("ar member name %q: longer than 16 bytes", name)
		return
	}
	a.write([]byte(fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, a.mtime, 0, 0, "100644", len(body))))
	a.write(body)
	if len(body)%2 == 1 {
		a.write([]byte("\n"))
	}
}
