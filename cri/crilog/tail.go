package crilog

import (
	"io"
)

// tailBlock is how much of the file tailStart reads at a time.
const tailBlock = 8 * 1024

// tailStart returns the offset of the n-th last line of the size bytes of
// r: the offset after the (n+1)-th newline from the end, 0 if there are not
// that many. A last line without a newline is not counted, so it comes on
// top of the n lines. n < 0 means the whole file.
func tailStart(r io.ReaderAt, size, n int64) (int64, error) {
	if n < 0 {
		return 0, nil
	}
	need := n + 1
	buf := make([]byte, tailBlock)
	for end := size; end > 0; {
		start := max(end-tailBlock, 0)
		b := buf[:end-start]
		if got, err := r.ReadAt(b, start); err != nil && !(err == io.EOF && got == len(b)) {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			if need--; need == 0 {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}
