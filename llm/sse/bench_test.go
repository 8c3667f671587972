package sse_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/llm/sse"
)

// streamBody is a realistic OpenAI streamed answer: 500 chunks of one or two words, a
// usage chunk and data: [DONE].
func streamBody() []byte {
	var b bytes.Buffer
	words := strings.Fields("the journal keeps every event so a session survives crashes and resumes on another node")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" %s\"},\"finish_reason\":null}]}\n\n", words[i%len(words)])
	}
	b.WriteString("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":500,\"total_tokens\":600}}\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkReader is the SSE reader's throughput over a streamed answer (bytes/s via
// SetBytes). Compare with BenchmarkBaselineScanLines (BENCHMARKS.md).
func BenchmarkReader(b *testing.B) {
	body := streamBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := sse.NewReader(bytes.NewReader(body))
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 502 {
			b.Fatalf("%d events", n)
		}
	}
}

// BenchmarkBaselineScanLines is the floor for BenchmarkReader: splitting the same bytes
// into lines with bufio.Scanner and picking the data: lines, with no event assembly,
// bounds or field handling.
func BenchmarkBaselineScanLines(b *testing.B) {
	body := streamBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			if bytes.HasPrefix(sc.Bytes(), []byte("data: ")) {
				n++
			}
		}
		if n != 502 {
			b.Fatalf("%d data lines", n)
		}
	}
}
