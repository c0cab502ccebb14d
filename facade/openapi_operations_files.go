package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// Descriptions of the /v3 file and signature routes (see openapi.go). Success bodies are
// wrapped in {"data": ...}, errors are {"error": {"code", "message"}}.

// uploadForm is the multipart body of POST /v3/files.
var uploadForm = &openapi.Schema{
	Type: "object", Required: []string{"file"},
	Properties: map[string]*openapi.Schema{
		"file":      openapi.Describe(&openapi.Schema{Type: "string", Format: "binary"}, "The file (the first part named `file`)."),
		"network":   openapi.Describe(openapi.EnumOf("public", "private"), "The network to store on (default `public`)."),
		"name":      openapi.Describe(openapi.String(), "The file's name (default: the part's filename)."),
		"keyvalues": openapi.Describe(openapi.String(), "A JSON object of string values, e.g. `{\"env\":\"prod\"}`."),
	},
}

func fileOperations() map[string]*openapi.Operation {
	fileReply := v3data(fileView{})
	signatureReply := v3data(openapi.Props{"cid": openapi.String(), "signature": openapi.String()})
	fileNotFound := openapi.Fails(http.StatusNotFound, msgNotFound, ops.MsgFileNotFound)
	signatureNotFound := openapi.Fails(http.StatusNotFound, msgNotFound, ops.MsgFileNotFound, ops.MsgSignatureNotFound)
	invalidCID := openapi.Fails(http.StatusBadRequest, ops.MsgInvalidCID)
	return map[string]*openapi.Operation{
		"GET /v3/data/testAuthentication": {
			ID: "testAuthentication", Tag: "files", Summary: "Check a token (the pinata SDK's auth check)",
			Description: "Not wrapped in `data`, as the hosted API answers it.",
			Replies:     []openapi.Reply{openapi.Answer(http.StatusOK, "The token is good.", openapi.Props{"message": openapi.String()})},
		},
		"POST /v3/files": {
			ID: "uploadFile", Tag: "files", Summary: "Upload a file",
			Description: "Stores the bytes by CID. Uploading the same bytes to the same network again answers the existing file. A file that would take the workspace over its files quota (`spec.quotas.files` of its Workspace: bytes and files) is refused with 403.",
			Multipart:   uploadForm,
			Replies:     []openapi.Reply{openapi.Answer(http.StatusOK, "The stored file.", fileReply)},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, "Invalid multipart body", msgFileRequired, ops.MsgInvalidNetwork, ops.MsgInvalidKeyValues, ops.MsgInvalidCID),
				openapi.Fails(http.StatusForbidden, ops.MsgStorageQuota),
				openapi.Fails(http.StatusServiceUnavailable, ops.MsgStorageMissing),
			},
		},
		"GET /v3/files/{network}": {
			ID: "listFiles", Tag: "files", Summary: "List files of a network",
			Query: []*openapi.Parameter{
				openapi.QueryParam("cid", "Only the file with this CID.", openapi.String()),
				openapi.QueryParam("name", "Only files whose name contains this.", openapi.String()),
				openapi.QueryParam("mimeType", "Only files of this MIME type.", openapi.String()),
				openapi.QueryParam("order", "By creation time; `DESC` (default) or `ASC`.", openapi.EnumOf("ASC", "DESC")),
				openapi.QueryParam("limit", "Page size (default 10, at most 1000).", &openapi.Schema{Type: "integer", Minimum: openapi.Ptr[int64](1), Maximum: openapi.Ptr[int64](1000)}),
				openapi.QueryParam("pageToken", "The `next_page_token` of the previous page.", openapi.String()),
				{Name: "keyvalues", In: "query", Style: "deepObject", Explode: openapi.Ptr(true), Description: "`keyvalues[key]=value`: only files with that key-value.",
					Schema: &openapi.Schema{Type: "object", AdditionalProperties: openapi.String()}},
			},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "A page of files; `next_page_token` is \"\" on the last page.", v3data(openapi.Props{
				"files": []fileView{}, "next_page_token": openapi.String(),
			}))},
			Fails: []openapi.Fail{openapi.Fails(http.StatusBadRequest, ops.MsgInvalidPageToken), openapi.Fails(http.StatusNotFound, msgNotFound)},
		},
		"GET /v3/files/{network}/{id}": {
			ID: "getFile", Tag: "files", Summary: "Read a file's record",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The file.", fileReply)},
			Fails:   []openapi.Fail{fileNotFound},
		},
		"DELETE /v3/files/{network}/{id}": {
			ID: "deleteFile", Tag: "files", Summary: "Delete a file and its bytes",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Deleted.", v3data(nil))},
			Fails:   []openapi.Fail{invalidCID, fileNotFound, openapi.Fails(http.StatusServiceUnavailable, ops.MsgStorageMissing)},
		},
		"POST /v3/files/{network}/signature/{cid}": {
			ID: "addSignature", Tag: "signatures", Summary: "Attach a wallet's signature to a file",
			Description: "Verifies the EIP-712 signature of (address, cid, the file's first upload date). A file holds one signature. " +
				"The body is read as JSON whatever its Content-Type.",
			Body: signatureRequest{}, Required: []string{"signature", "address"},
			Fields: map[string]*openapi.Schema{
				"signature": {Description: "0x followed by 130 hex digits."},
				"address":   {Description: "The wallet: 0x followed by 40 hex digits (EIP-55 checksum when mixed-case)."},
			},
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The target CID and the signature as sent.", signatureReply)},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidCID, ops.MsgSignatureBody, ops.MsgSignatureFields, ops.MsgAddressChecksum, ops.MsgAddressFormat,
					ops.MsgSignatureFormat, ops.MsgSignatureMismatch),
				fileNotFound, openapi.Fails(http.StatusConflict, ops.MsgAlreadySigned),
			},
		},
		"GET /v3/files/{network}/signature/{cid}": {
			ID: "getSignature", Tag: "signatures", Summary: "Read a file's signature",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The CID and its signature.", signatureReply)},
			Fails:   []openapi.Fail{invalidCID, signatureNotFound},
		},
		"DELETE /v3/files/{network}/signature/{cid}": {
			ID: "deleteSignature", Tag: "signatures", Summary: "Remove a file's signature",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "Removed.", v3data(nil))},
			Fails:   []openapi.Fail{invalidCID, signatureNotFound},
		},
	}
}
