package modelproxy

import (
	"strings"
	"testing"
)

func TestUsageScanner(t *testing.T) {
	anthropic, _ := Lookup("anthropic")
	openai, _ := Lookup("openai")
	google, _ := Lookup("google")
	big := strings.Repeat("x", 3*maxLine)
	for _, tc := range []struct {
		name    string
		p       Provider
		ct      string
		body    string
		in, out int64
	}{
		{"anthropic sse, cumulative output", anthropic, "text/event-stream",
			"event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":2,\"output_tokens\":1}}}\n\n" +
				"event: message_delta\ndata: {\"usage\":{\"output_tokens\":4}}\n\nevent: message_delta\ndata: {\"usage\":{\"output_tokens\":9}}\n\n", 7, 9},
		{"escaped usage in text is not usage", anthropic, "text/event-stream",
			"data: {\"delta\":{\"text\":\"{\\\"usage\\\":{\\\"output_tokens\\\":999}}\"}}\n\ndata: {\"usage\":{\"output_tokens\":2}}\n", 0, 2},
		{"usage: null skipped", openai, "text/event-stream; charset=utf-8",
			"data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: {\"choices\":[],\"usage\":null}\n\ndata: [DONE]\n\n", 3, 4},
		{"responses completed event longer than the line cap", openai, "text/event-stream",
			"event: response.created\ndata: {\"response\":{\"usage\":null}}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"text\":\"" + big + "\"}],\"usage\":{\"input_tokens\":8,\"output_tokens\":6}}}\n\n", 8, 6},
		{"a comment line naming data is skipped", openai, "text/event-stream",
			": {\"usage\":{\"prompt_tokens\":50}}\ndata: {\"usage\":{\"prompt_tokens\":5}}", 5, 0},
		{"json body larger than the cap", openai, "application/json",
			"{\"data\":[{\"embedding\":\"" + big + "\"}],\n \"usage\" : {\"prompt_tokens\": 12, \"total_tokens\": 12}\n}", 12, 0},
		{"google sse", google, "text/event-stream",
			"data: {\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":1}}\r\n\r\ndata: {\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":6,\"thoughtsTokenCount\":2}}\r\n\r\n", 4, 8},
		{"google ignores openai key", google, "application/json", `{"usage":{"prompt_tokens":3}}`, 0, 0},
		{"other content types are not read", openai, "text/plain", `{"usage":{"prompt_tokens":3}}`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 4096, len(tc.body)} {
				s := newUsageScanner(tc.p, tc.ct)
				if s == nil {
					if tc.in != 0 || tc.out != 0 {
						t.Fatal("no scanner")
					}
					return
				}
				for b := tc.body; len(b) > 0; {
					n := min(chunk, len(b))
					s.write([]byte(b[:n]))
					b = b[n:]
				}
				if cap(*s.buf) > 3*maxLine {
					t.Errorf("chunk %d: buffer grew to %d", chunk, cap(*s.buf))
				}
				if in, out := s.finish(); in != tc.in || out != tc.out {
					t.Errorf("chunk %d: got %d/%d, want %d/%d", chunk, in, out, tc.in, tc.out)
				}
			}
		})
	}
}
