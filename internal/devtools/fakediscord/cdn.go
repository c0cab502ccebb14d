package fakediscord

import (
	"mime"
	"net/http"
	"path"
	"strconv"
)

// cdnFile is an attachment the fake's CDN serves.
type cdnFile struct {
	data        []byte
	contentType string
}

// CDNURL is the fake's CDN: what serves the attachments whose URLs the messages give as
// https://cdn.discordapp.com/<path> (and https://media.discordapp.net/<path>), at CDNURL()/<path>.
func (s *Server) CDNURL() string { return s.srv.URL + "/cdn" }

// SendDMWithFile sends a DM from the user with one attachment, name holding data.
func (s *Server) SendDMWithFile(content, name string, data []byte) (messageID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.message(s.opts.DMChannelID, s.user(), content)
	id := s.snowflake()
	p := "attachments/" + s.opts.DMChannelID + "/" + id + "/" + name
	query := "?ex=6a000000&is=69f00000&hm=" + id
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	s.files[p] = cdnFile{data: append([]byte(nil), data...), contentType: ct}
	m["attachments"] = []any{map[string]any{
		"id": id, "filename": name, "size": len(data), "content_type": ct,
		"url": "https://cdn.discordapp.com/" + p + query, "proxy_url": "https://media.discordapp.net/" + p + query,
	}}
	s.created(m)
	return m["id"].(string)
}

// CDNFetches is how many attachments the CDN served.
func (s *Server) CDNFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cdnFetches
}

// cdn serves an attachment: no token, as Discord's CDN asks none (its URLs are signed).
func (s *Server) cdn(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("path")]
	if ok {
		s.cdnFetches++
		s.notify()
	}
	s.mu.Unlock()
	if !ok || r.URL.Query().Get("hm") == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}
