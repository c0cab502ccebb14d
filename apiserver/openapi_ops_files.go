package apiserver

import "net/http"

// Descriptions of the /v3 file and signature routes (see openapi.go). Success bodies are
// wrapped in {"data": ...}, errors are {"error": {"code", "message"}}.

// uploadForm is the multipart body of POST /v3/files.
var uploadForm = &schema{
	Type: "object", Required: []string{"file"},
	Properties: map[string]*schema{
		"file":      describe(&schema{Type: "string", Format: "binary"}, "The file (the first part named `file`)."),
		"network":   describe(enumOf("public", "private"), "The network to store on (default `public`)."),
		"name":      describe(docString(), "The file's name (default: the part's filename)."),
		"keyvalues": describe(docString(), "A JSON object of string values, e.g. `{\"env\":\"prod\"}`."),
	},
}

func fileOps() map[string]*op {
	fileReply := v3data(fileView{})
	signatureReply := v3data(props{"cid": docString(), "signature": docString()})
	fileNotFound := fails(http.StatusNotFound, msgNotFound, msgFileNotFound)
	signatureNotFound := fails(http.StatusNotFound, msgNotFound, msgFileNotFound, msgSignatureNotFound)
	invalidCID := fails(http.StatusBadRequest, msgInvalidCID)
	return map[string]*op{
		"GET /v3/data/testAuthentication": {
			id: "testAuthentication", tag: "files", summary: "Check a token (the pinata SDK's auth check)",
			description: "Not wrapped in `data`, as the hosted API answers it.",
			replies:     []reply{answer(http.StatusOK, "The token is good.", props{"message": docString()})},
		},
		"POST /v3/files": {
			id: "uploadFile", tag: "files", summary: "Upload a file",
			description: "Stores the bytes by CID. Uploading the same bytes to the same network again answers the existing file. A file that would take the workspace over its files quota (`spec.quotas.files` of its Workspace: bytes and files) is refused with 403.",
			multipart:   uploadForm,
			replies:     []reply{answer(http.StatusOK, "The stored file.", fileReply)},
			fails: []fail{
				fails(http.StatusBadRequest, "Invalid multipart body", msgFileRequired, msgInvalidNetwork, msgInvalidKeyValues, msgInvalidCID),
				fails(http.StatusForbidden, msgStorageQuota),
				fails(http.StatusServiceUnavailable, msgStorageMissing),
			},
		},
		"GET /v3/files/{network}": {
			id: "listFiles", tag: "files", summary: "List files of a network",
			query: []*parameter{
				queryParam("cid", "Only the file with this CID.", docString()),
				queryParam("name", "Only files whose name contains this.", docString()),
				queryParam("mimeType", "Only files of this MIME type.", docString()),
				queryParam("order", "By creation time; `DESC` (default) or `ASC`.", enumOf("ASC", "DESC")),
				queryParam("limit", "Page size (default 10, at most 1000).", &schema{Type: "integer", Minimum: docPtr[int64](1), Maximum: docPtr[int64](1000)}),
				queryParam("pageToken", "The `next_page_token` of the previous page.", docString()),
				{Name: "keyvalues", In: "query", Style: "deepObject", Explode: docPtr(true), Description: "`keyvalues[key]=value`: only files with that key-value.",
					Schema: &schema{Type: "object", AdditionalProperties: docString()}},
			},
			replies: []reply{answer(http.StatusOK, "A page of files; `next_page_token` is \"\" on the last page.", v3data(props{
				"files": []fileView{}, "next_page_token": docString(),
			}))},
			fails: []fail{fails(http.StatusBadRequest, "Invalid pageToken"), fails(http.StatusNotFound, msgNotFound)},
		},
		"GET /v3/files/{network}/{id}": {
			id: "getFile", tag: "files", summary: "Read a file's record",
			replies: []reply{answer(http.StatusOK, "The file.", fileReply)},
			fails:   []fail{fileNotFound},
		},
		"DELETE /v3/files/{network}/{id}": {
			id: "deleteFile", tag: "files", summary: "Delete a file and its bytes",
			replies: []reply{answer(http.StatusOK, "Deleted.", v3data(nil))},
			fails:   []fail{invalidCID, fileNotFound, fails(http.StatusServiceUnavailable, msgStorageMissing)},
		},
		"POST /v3/files/{network}/signature/{cid}": {
			id: "addSignature", tag: "signatures", summary: "Attach a wallet's signature to a file",
			description: "Verifies the EIP-712 signature of (address, cid, the file's first upload date). A file holds one signature. " +
				"The body is read as JSON whatever its Content-Type.",
			body: signatureRequest{}, required: []string{"signature", "address"},
			fields: map[string]*schema{
				"signature": {Description: "0x followed by 130 hex digits."},
				"address":   {Description: "The wallet: 0x followed by 40 hex digits (EIP-55 checksum when mixed-case)."},
			},
			replies: []reply{answer(http.StatusOK, "The target CID and the signature as sent.", signatureReply)},
			fails: []fail{
				fails(http.StatusBadRequest, msgInvalidCID, msgSignatureBody, msgSignatureFields, msgAddressChecksum, msgAddressFormat,
					msgSignatureFormat, msgSignatureMismatch),
				fileNotFound, fails(http.StatusConflict, msgAlreadySigned),
			},
		},
		"GET /v3/files/{network}/signature/{cid}": {
			id: "getSignature", tag: "signatures", summary: "Read a file's signature",
			replies: []reply{answer(http.StatusOK, "The CID and its signature.", signatureReply)},
			fails:   []fail{invalidCID, signatureNotFound},
		},
		"DELETE /v3/files/{network}/signature/{cid}": {
			id: "deleteSignature", tag: "signatures", summary: "Remove a file's signature",
			replies: []reply{answer(http.StatusOK, "Removed.", v3data(nil))},
			fails:   []fail{invalidCID, signatureNotFound},
		},
	}
}
