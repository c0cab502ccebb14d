package channelrelay

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DiscordMediaPath is where the relay serves a message's attachments to the agent's gateway:
// under DISCORD_API_URL the engine's Discord plugin fetches media only from the REST base's
// origin, and Discord's attachment URLs are on its CDN. The relay rewrites each attachment's
// URL in the messages it sends to DiscordMediaPath + MAC + "/" + host + path (with the CDN's
// own signed query) and fetches it from the CDN when asked: only URLs the relay handed out
// open, so the route is no general way out to Discord.
const DiscordMediaPath = "/relay/discord/media/"

// discordCDNHosts are the hosts of Discord's attachment URLs.
var discordCDNHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// mediaMAC authenticates one CDN URL (its host, unescaped path and query) for the relay's
// media route.
func (r *DiscordRouter) mediaMAC(host, path, rawQuery string) string {
	m := hmac.New(sha256.New, r.mediaKey)
	m.Write([]byte(host + "\x00/" + strings.TrimPrefix(path, "/") + "\x00" + rawQuery))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// mediaURL is cdnURL as the relay at origin serves it ("" when it is not on Discord's CDN).
func (r *DiscordRouter) mediaURL(origin, cdnURL string) string {
	u, err := url.Parse(cdnURL)
	if err != nil || u.Scheme != "https" || !discordCDNHosts[u.Host] || u.User != nil {
		return ""
	}
	return origin + DiscordMediaPath + r.mediaMAC(u.Host, u.Path, u.RawQuery) + "/" + u.Host + u.EscapedPath() + querySuffix(u.RawQuery)
}

func querySuffix(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

// withMedia rewrites the attachments' URLs of a message (MESSAGE_CREATE, MESSAGE_UPDATE) for
// the relay at origin; anything else, or a message it cannot read, goes as it is.
func (r *DiscordRouter) withMedia(origin string, d json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(d, &m) != nil || len(m["attachments"]) == 0 {
		return d
	}
	var atts []map[string]any
	if json.Unmarshal(m["attachments"], &atts) != nil || len(atts) == 0 {
		return d
	}
	for _, a := range atts {
		for _, k := range []string{"url", "proxy_url"} {
			if s, _ := a[k].(string); s != "" {
				if relayed := r.mediaURL(origin, s); relayed != "" {
					a[k] = relayed
				}
			}
		}
	}
	b, err := json.Marshal(atts)
	if err != nil {
		return d
	}
	m["attachments"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return d
	}
	return out
}

func newMediaKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// discordMedia serves one attachment the relay handed out: the CDN URL the path names, if its
// MAC is the relay's, fetched from Discord's CDN (or Options.DiscordCDN) without any of the
// caller's headers but Range.
func (r *Relay) discordMedia(w http.ResponseWriter, req *http.Request) {
	mac, host, p := req.PathValue("mac"), req.PathValue("host"), req.PathValue("path")
	if r.opts.Discord == nil || !discordCDNHosts[host] || strings.Contains(p, "..") {
		discordError(w, http.StatusNotFound, "404: Not Found")
		return
	}
	if !hmac.Equal([]byte(mac), []byte(r.opts.Discord.mediaMAC(host, p, req.URL.RawQuery))) {
		discordError(w, http.StatusNotFound, "404: Not Found")
		return
	}
	u := &url.URL{Scheme: "https", Host: host, Path: "/" + p, RawQuery: req.URL.RawQuery}
	if r.opts.DiscordCDN != "" { // tests: the fake's CDN, by path
		base, err := url.Parse(strings.TrimSuffix(r.opts.DiscordCDN, "/"))
		if err != nil {
			discordError(w, http.StatusNotFound, "404: Not Found")
			return
		}
		u.Scheme, u.Host, u.Path = base.Scheme, base.Host, base.Path+"/"+p
	}
	out, _ := http.NewRequestWithContext(req.Context(), req.Method, u.String(), nil)
	if rg := req.Header.Get("Range"); rg != "" {
		out.Header.Set("Range", rg)
	}
	start := time.Now()
	r.discordProxy.ServeHTTP(w, out)
	r.opts.Log.V(1).Info("relayed", "channel", "discord", "media", host, "duration", time.Since(start).Round(time.Millisecond))
}
