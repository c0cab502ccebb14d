package facade

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// decodeJSON reads one JSON object from the request body into v. Malformed JSON, a value of
// the wrong type, a non-object or trailing data answer 400 with badRequest; a body over the
// route's limit answers 413. Unknown fields are ignored (clients such as SDKs send extras).
func decodeJSON(r *http.Request, v any, badRequest string) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
		}
		return withCause(http.StatusBadRequest, badRequest, err)
	}
	return decodeJSONBytes(raw, v, badRequest)
}

// decodeJSONBytes is decodeJSON for a body already read.
func decodeJSONBytes(raw []byte, v any, badRequest string) error {
	var probe json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return withCause(http.StatusBadRequest, badRequest, err)
	}
	if len(probe) == 0 || probe[0] != '{' {
		return errorf(http.StatusBadRequest, badRequest)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return withCause(http.StatusBadRequest, badRequest, err)
	}
	return nil
}
