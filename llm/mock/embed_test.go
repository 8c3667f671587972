package mock_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fathom-agents/fathom/llm/mock"
)

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

func TestEmbeddingsEndpoint(t *testing.T) {
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	defer srv.Close()
	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+"/v1/embeddings", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := post(`{"model":"m","input":["event sourcing with actors","actors and event sourcing","a recipe for soup"],"dimensions":64}`)
	if code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	data := out["data"].([]any)
	vec := func(i int) []float32 {
		raw := data[i].(map[string]any)["embedding"].([]any)
		v := make([]float32, len(raw))
		for j, x := range raw {
			v[j] = float32(x.(float64))
		}
		return v
	}
	a, b, c := vec(0), vec(1), vec(2)
	if len(a) != 64 || math.Abs(cosine(a, a)-1) > 1e-5 {
		t.Fatalf("dims %d, norm² %f", len(a), cosine(a, a))
	}
	if cosine(a, b) < 0.7 || cosine(a, c) > 0.3 {
		t.Fatalf("similar %f, unrelated %f", cosine(a, b), cosine(a, c))
	}
	if got := mock.Embed("event sourcing with actors", 64); cosine(got, a) < 0.9999 {
		t.Fatal("Embed is not what the endpoint serves")
	}
	for _, bad := range []string{`{`, `{"input":[]}`, `{"input":"x","dimensions":99999}`} {
		if code, _ := post(bad); code != 400 {
			t.Errorf("%s: status %d", bad, code)
		}
	}
}

// TestEmbeddingsBase64: encoding_format base64 returns the little-endian float32 bytes
// of the same vector (what the official clients request by default).
func TestEmbeddingsBase64(t *testing.T) {
	srv := httptest.NewServer(mock.New(mock.Config{Script: mock.DemoScript()}).Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/embeddings", "application/json", bytes.NewBufferString(`{"input":"event sourcing","dimensions":8,"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Data) != 1 {
		t.Fatalf("decode: %v %v", err, out)
	}
	raw, err := base64.StdEncoding.DecodeString(out.Data[0].Embedding)
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64 %q: %v (%d bytes)", out.Data[0].Embedding, err, len(raw))
	}
	want := mock.Embed("event sourcing", 8)
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
			t.Fatalf("component %d = %v, want %v", i, got, want[i])
		}
	}
	bad, err := http.Post(srv.URL+"/v1/embeddings", "application/json", bytes.NewBufferString(`{"input":"x","encoding_format":"int8"}`))
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown encoding_format: HTTP %d", bad.StatusCode)
	}
}
