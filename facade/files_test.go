package facade_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/crypto"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/eip712"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// upload posts a multipart file the way the pinata SDK does.
func upload(tok, network, name string, content []byte, keyvalues map[string]string) reply {
	return uploadAt(baseURL, tok, network, name, content, keyvalues)
}

// uploadAt is upload to the facade at url.
func uploadAt(url, tok, network, name string, content []byte, keyvalues map[string]string) reply {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", name)
	Expect(err).NotTo(HaveOccurred())
	_, _ = fw.Write(content)
	_ = mw.WriteField("network", network)
	_ = mw.WriteField("name", name)
	if keyvalues != nil {
		kv, _ := json.Marshal(keyvalues)
		_ = mw.WriteField("keyvalues", string(kv))
	}
	Expect(mw.Close()).To(Succeed())
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v3/files", &buf)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func dataOf(r reply) map[string]any {
	d, _ := r.Body["data"].(map[string]any)
	return d
}

// sign makes the EIP-712 signature a wallet would for (cid, date).
func sign(key []byte, cidStr, date string) (address, signature string) {
	priv, err := crypto.ToECDSA(key)
	Expect(err).NotTo(HaveOccurred())
	address = crypto.PubkeyToAddress(priv.PublicKey).Hex()
	h, err := eip712.Hash(address, cidStr, date)
	Expect(err).NotTo(HaveOccurred())
	sig, err := crypto.Sign(h, priv)
	Expect(err).NotTo(HaveOccurred())
	sig[64] += 27
	return address, "0x" + hex.EncodeToString(sig)
}

var walletKey = bytes.Repeat([]byte{0x42}, 32)

var _ = Describe("Files (/v3)", func() {
	var tok, other, readOnly string

	BeforeEach(func() {
		workspace("files-a", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "fay", Role: agentsv1.RoleOwner})
		workspace("files-b", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "bo", Role: agentsv1.RoleOwner})
		tok = token("files-a", "fay", "", auth.ScopeFilesWrite)
		readOnly = token("files-a", "fay", "", auth.ScopeFilesRead)
		other = token("files-b", "bo", "", auth.ScopeFilesWrite)
	})

	It("stores a file by its UnixFS CID, idempotently", func() {
		content := []byte("hello world\n")
		r := upload(tok, "public", "hello.txt", content, map[string]string{"env": "test"})
		Expect(r.Status).To(Equal(200), r.Raw)
		d := dataOf(r)
		want, _, err := cid.Compute(bytes.NewReader(content))
		Expect(err).NotTo(HaveOccurred())
		Expect(d["cid"]).To(Equal(want.String()))
		Expect(d["cid"]).To(Equal("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"))
		Expect(d).To(HaveKeyWithValue("size", 12.0))
		Expect(d).To(HaveKeyWithValue("network", "public"))
		Expect(d).To(HaveKeyWithValue("name", "hello.txt"))
		Expect(d["keyvalues"]).To(HaveKeyWithValue("env", "test"))
		Expect(d["created_at"]).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`))

		again := dataOf(upload(tok, "public", "renamed.txt", content, nil))
		Expect(again["id"]).To(Equal(d["id"]))
		Expect(again["created_at"]).To(Equal(d["created_at"]), "a re-upload keeps the first upload time")

		got := call("GET", "/v3/files/public/"+d["id"].(string), readOnly, nil, "Content-Type", "application/json")
		Expect(got.Status).To(Equal(200), got.Raw)
		Expect(dataOf(got)["cid"]).To(Equal(d["cid"]))
	})

	It("keeps networks and workspaces apart", func() {
		d := dataOf(upload(tok, "private", "secret.bin", []byte("private bytes"), nil))
		id := d["id"].(string)
		Expect(call("GET", "/v3/files/public/"+id, tok, nil).Status).To(Equal(404))
		Expect(call("GET", "/v3/files/private/"+id, other, nil).Status).To(Equal(404))
		list := dataOf(call("GET", "/v3/files/private", other, nil))
		Expect(list["files"]).To(BeEmpty())
		code, _ := call("GET", "/v3/files/ipfs", tok, nil).v3Error()
		Expect(code).To(Equal(404.0))
	})

	It("lists with filters and pages until next_page_token is empty", func() {
		for i := range 5 {
			Expect(upload(tok, "public", fmt.Sprintf("page-%d.txt", i), []byte(fmt.Sprintf("page %d", i)), map[string]string{"batch": "p"}).Status).To(Equal(200))
		}
		seen := map[string]bool{}
		pageToken := ""
		for range 10 {
			r := call("GET", "/v3/files/public?limit=2&keyvalues%5Bbatch%5D=p&pageToken="+pageToken, readOnly, nil)
			Expect(r.Status).To(Equal(200), r.Raw)
			d := dataOf(r)
			for _, f := range d["files"].([]any) {
				seen[f.(map[string]any)["name"].(string)] = true
			}
			pageToken = d["next_page_token"].(string)
			if pageToken == "" {
				break
			}
		}
		Expect(seen).To(HaveLen(5))
		byCID := dataOf(call("GET", "/v3/files/public?cid=bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", readOnly, nil))
		Expect(byCID["files"]).To(HaveLen(1))
	})

	It("deletes a file and answers {data:null}", func() {
		id := dataOf(upload(tok, "public", "gone.txt", []byte("soon gone"), nil))["id"].(string)
		r := call("DELETE", "/v3/files/public/"+id, tok, nil)
		Expect(r.Status).To(Equal(200))
		Expect(strings.TrimSpace(r.Raw)).To(Equal(`{"data":null}`))
		Expect(call("GET", "/v3/files/public/"+id, tok, nil).Status).To(Equal(404))
	})

	It("needs org:files:write to upload", func() {
		Expect(upload(readOnly, "public", "x.txt", []byte("x"), nil).Status).To(Equal(403))
	})

	Describe("signatures", func() {
		var fileCID, date string

		BeforeEach(func() {
			d := dataOf(upload(tok, "public", "signed.txt", []byte("content to sign"), nil))
			fileCID, date = d["cid"].(string), d["created_at"].(string)
			call("DELETE", "/v3/files/public/signature/"+fileCID, tok, nil)
		})

		It("adds, reads and removes a verified signature, echoing it as sent", func() {
			addr, sig := sign(walletKey, fileCID, date)
			// The SDK may send a non-JSON content type; the body is JSON all the same.
			r := send("POST", "/v3/files/public/signature/"+fileCID, tok, "text/plain", map[string]string{"signature": sig, "address": addr})
			Expect(r.Status).To(Equal(200), r.Raw)
			Expect(r.Body).To(Equal(map[string]any{"data": map[string]any{"cid": fileCID, "signature": sig}}))
			Expect(r.Header.Get("Content-Type")).To(Equal("application/json; charset=utf-8"))
			Expect(r.Header.Get("Strict-Transport-Security")).To(Equal("max-age=31536000; includeSubDomains"))
			Expect(r.Header.Get("X-Request-Id")).NotTo(BeEmpty())

			got := call("GET", "/v3/files/public/signature/"+fileCID, readOnly, nil)
			Expect(got.Status).To(Equal(200))
			Expect(dataOf(got)["signature"]).To(Equal(sig))

			again := call("POST", "/v3/files/public/signature/"+fileCID, tok, map[string]string{"signature": sig, "address": addr})
			Expect(again.Status).To(Equal(409), again.Raw)

			del := call("DELETE", "/v3/files/public/signature/"+fileCID, tok, nil)
			Expect(del.Status).To(Equal(200))
			Expect(strings.TrimSpace(del.Raw)).To(Equal(`{"data":null}`))
			Expect(call("GET", "/v3/files/public/signature/"+fileCID, readOnly, nil).Status).To(Equal(404))
		})

		It("lets exactly one of concurrent signers win", func() {
			addr, sig := sign(walletKey, fileCID, date)
			var wg sync.WaitGroup
			codes := make(chan int, 10)
			for range 10 {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					codes <- call("POST", "/v3/files/public/signature/"+fileCID, tok, map[string]string{"signature": sig, "address": addr}).Status
				}()
			}
			wg.Wait()
			close(codes)
			count := map[int]int{}
			for c := range codes {
				count[c]++
			}
			Expect(count).To(Equal(map[int]int{200: 1, 409: 9}))
		})

		DescribeTable("refuses bad signature requests",
			func(mut func(addr, sig, cidStr *string, body *any, tok *string), status int, message string) {
				addr, sig := sign(walletKey, fileCID, date)
				c := fileCID
				var body any
				t := tok
				mut(&addr, &sig, &c, &body, &t)
				if body == nil {
					body = map[string]string{"signature": sig, "address": addr}
				}
				r := call("POST", "/v3/files/public/signature/"+c, t, body)
				Expect(r.Status).To(Equal(status), r.Raw)
				code, msg := r.v3Error()
				Expect(code).To(Equal(float64(status)))
				Expect(msg).To(ContainSubstring(message))
			},
			Entry("missing address", func(_, sig, _ *string, body *any, _ *string) { *body = map[string]string{"signature": *sig} }, 400, "signature and address are required"),
			Entry("missing signature", func(addr, _, _ *string, body *any, _ *string) { *body = map[string]string{"address": *addr} }, 400, "signature and address are required"),
			Entry("not JSON", func(_, _, _ *string, body *any, _ *string) { *body = "signature=1" }, 400, "Body must be a JSON object"),
			Entry("wrong field type", func(_, _, _ *string, body *any, _ *string) { *body = map[string]any{"signature": 1, "address": true} }, 400, "Body must be a JSON object"),
			Entry("short address", func(addr, _, _ *string, _ *any, _ *string) { *addr = "0x1234" }, 400, "Invalid address"),
			Entry("bad checksum", func(addr, _, _ *string, _ *any, _ *string) {
				b := []byte(*addr)
				for i := 2; i < len(b); i++ {
					if b[i] >= 'a' && b[i] <= 'f' {
						b[i] -= 32
						break
					} else if b[i] >= 'A' && b[i] <= 'F' {
						b[i] += 32
						break
					}
				}
				*addr = string(b)
			}, 400, "checksum"),
			Entry("short signature", func(_, sig, _ *string, _ *any, _ *string) { *sig = (*sig)[:40] }, 400, "Invalid signature"),
			Entry("signature by another wallet", func(addr, _, _ *string, _ *any, _ *string) {
				*addr, _ = sign(bytes.Repeat([]byte{0x07}, 32), fileCID, date)
			}, 400, "Signature does not match address"),
			Entry("signature over another date", func(addr, sig, _ *string, _ *any, _ *string) {
				*addr, *sig = sign(walletKey, fileCID, "2020-01-01T00:00:00.000Z")
			}, 400, "Signature does not match address"),
			Entry("malformed CID", func(_, _, c *string, _ *any, _ *string) { *c = "not-a-cid" }, 400, "Invalid CID"),
			Entry("CID that is not a file here", func(_, _, c *string, _ *any, _ *string) {
				*c = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
			}, 404, "File not found"),
			Entry("CID of another workspace", func(_, _, _ *string, _ *any, t *string) { *t = other }, 404, "File not found"),
			Entry("no write scope", func(_, _, _ *string, _ *any, t *string) { *t = readOnly }, 403, "Missing scope"),
			Entry("no token", func(_, _, _ *string, _ *any, t *string) { *t = "" }, 401, "Unauthorized"),
		)

		It("answers 404 for a network that is neither public nor private", func() {
			addr, sig := sign(walletKey, fileCID, date)
			r := call("POST", "/v3/files/ipfs/signature/"+fileCID, tok, map[string]string{"signature": sig, "address": addr})
			Expect(r.Status).To(Equal(404))
		})
	})
})
