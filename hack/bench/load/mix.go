package main

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/crypto"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/agentplane/agentplane/internal/adapters/eip712"
)

// kind is one request of the mix and its share of it (in sixtieths).
type kind struct {
	name  string
	share int
}

// mixKinds: 60% agent reads, 20% console exec, 10% secrets, 10% /v3 upload and signatures.
var mixKinds = []kind{
	{"GET /v0/agents", 18}, {"GET /v0/agents/{id}", 18},
	{"POST console/exec echo", 12},
	{"POST /v0/secrets", 3}, {"GET /v0/secrets", 3},
	{"POST /v3/files", 2}, {"POST signature", 2}, {"GET signature", 2},
}

// file is an uploaded /v3 file: what its signature covers.
type file struct{ cid, date string }

// workload is the state the mix's requests draw on: the agent, the files to sign (each once)
// and the signed files to read.
type workload struct {
	base, token string
	agent       string
	key         *ecdsa.PrivateKey
	address     string
	unsigned    []file
	signed      []file
	slot        atomic.Uint64
	nextSign    atomic.Uint64
	unique      atomic.Uint64
}

// schedule maps the 60 slots of one cycle of the mix to kinds, interleaved so that every
// second of the attack sees the whole mix.
func schedule() []int {
	var out []int
	left := make([]int, len(mixKinds))
	for i, k := range mixKinds {
		left[i] = k.share
	}
	for len(out) < 60 {
		for i := range mixKinds {
			if left[i] > 0 {
				out = append(out, i)
				left[i]--
			}
		}
	}
	return out
}

// kindOf classifies a result by its method and URL.
func kindOf(method, url string) string {
	switch {
	case strings.HasSuffix(url, "/console/exec"):
		return mixKinds[2].name
	case strings.Contains(url, "/v0/secrets"):
		if method == http.MethodPost {
			return mixKinds[3].name
		}
		return mixKinds[4].name
	case strings.HasSuffix(url, "/v3/files"):
		return mixKinds[5].name
	case strings.Contains(url, "/signature/"):
		if method == http.MethodPost {
			return mixKinds[6].name
		}
		return mixKinds[7].name
	case strings.HasSuffix(url, "/v0/agents"):
		return mixKinds[0].name
	case strings.Contains(url, "/v0/agents/"):
		return mixKinds[1].name
	}
	return "GET /healthz"
}

// targeter returns the mix's requests in schedule order.
func (w *workload) targeter() vegeta.Targeter {
	slots := schedule()
	auth := http.Header{"Authorization": {"Bearer " + w.token}}
	js := http.Header{"Authorization": {"Bearer " + w.token}, "Content-Type": {"application/json"}}
	return func(t *vegeta.Target) error {
		n := w.slot.Add(1) - 1
		t.Header, t.Body = auth, nil
		switch mixKinds[slots[n%uint64(len(slots))]].name {
		case "GET /v0/agents":
			t.Method, t.URL = "GET", w.base+"/v0/agents"
		case "GET /v0/agents/{id}":
			t.Method, t.URL = "GET", w.base+"/v0/agents/"+w.agent
		case "POST console/exec echo":
			t.Method, t.URL, t.Header, t.Body = "POST", w.base+"/v0/agents/"+w.agent+"/console/exec", js, []byte(`{"command":"echo load"}`)
		case "POST /v0/secrets":
			body, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("load-%d", w.unique.Add(1)), "value": "v"})
			t.Method, t.URL, t.Header, t.Body = "POST", w.base+"/v0/secrets", js, body
		case "GET /v0/secrets":
			t.Method, t.URL = "GET", w.base+"/v0/secrets"
		case "POST /v3/files":
			ct, body := multipartFile(fmt.Sprintf("load file %d", w.unique.Add(1)))
			t.Method, t.URL, t.Body = "POST", w.base+"/v3/files", body
			t.Header = http.Header{"Authorization": {"Bearer " + w.token}, "Content-Type": {ct}}
		case "POST signature":
			f := w.unsigned[(w.nextSign.Add(1)-1)%uint64(len(w.unsigned))]
			body, _ := json.Marshal(map[string]string{"signature": w.sign(f), "address": w.address})
			t.Method, t.URL, t.Header, t.Body = "POST", w.base+"/v3/files/public/signature/"+f.cid, js, body
		case "GET signature":
			f := w.signed[n%uint64(len(w.signed))]
			t.Method, t.URL = "GET", w.base+"/v3/files/public/signature/"+f.cid
		}
		return nil
	}
}

// prepare creates the agent and uploads the files the signature requests use: unsigned ones
// for every signature POST the attacks will send (each file takes one signature) and a few
// signed ones for the GETs.
func (w *workload) prepare(signatures int) error {
	var out struct{ Agent struct{ ID string } }
	if err := w.call("POST", "/v0/agents", "application/json", []byte(`{"name":"load"}`), 201, &out); err != nil {
		return err
	}
	w.agent = out.Agent.ID
	var err error
	if w.key, err = crypto.GenerateKey(); err != nil {
		return err
	}
	w.address = crypto.PubkeyToAddress(w.key.PublicKey).Hex()
	for i := range signatures + 20 {
		var up struct {
			Data struct {
				CID       string `json:"cid"`
				CreatedAt string `json:"created_at"`
			}
		}
		ct, body := multipartFile(fmt.Sprintf("pool file %d", i))
		if err := w.call("POST", "/v3/files", ct, body, 200, &up); err != nil {
			return err
		}
		f := file{cid: up.Data.CID, date: up.Data.CreatedAt}
		if i < 20 {
			sig, _ := json.Marshal(map[string]string{"signature": w.sign(f), "address": w.address})
			if err := w.call("POST", "/v3/files/public/signature/"+f.cid, "application/json", sig, 200, nil); err != nil {
				return err
			}
			w.signed = append(w.signed, f)
		} else {
			w.unsigned = append(w.unsigned, f)
		}
	}
	return nil
}

// sign is the wallet's EIP-712 signature of f.
func (w *workload) sign(f file) string {
	h, err := eip712.Hash(w.address, f.cid, f.date)
	if err != nil {
		panic(err)
	}
	sig, err := crypto.Sign(h, w.key)
	if err != nil {
		panic(err)
	}
	sig[64] += 27
	return "0x" + hex.EncodeToString(sig)
}

// call sends one setup request and decodes its answer into out (when not nil).
func (w *workload) call(method, path, contentType string, body []byte, want int, out any) error {
	req, err := http.NewRequest(method, w.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// multipartFile is an upload of one small file with the given content.
func multipartFile(content string) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "load.txt")
	_, _ = fw.Write([]byte(content))
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}
