package local

import (
	"fmt"
	"os"

	"github.com/checkpoint-restore/go-criu/v7/crit"
	"google.golang.org/protobuf/proto"
)

// readImage decodes the CRIU image file at path whose entries are of type typ and whose magic
// is magic (go-criu's crit decodes by the type it is given, whatever the file holds).
func readImage(path, magic string, typ proto.Message) (*crit.CriuImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := crit.New(f, nil, "", false, false).Decode(typ)
	if err != nil {
		return nil, err
	}
	if img.Magic != magic {
		return nil, fmt.Errorf("not a %s image (%s)", magic, img.Magic)
	}
	return img, nil
}

// writeImage encodes img as the CRIU image file at path.
func writeImage(path string, img *crit.CriuImage) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := crit.New(nil, f, "", false, false).Encode(img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
