//go:build tools

// Package s3server pins the S3-compatible server that the internal/adapters/storage/s3
// tests run against: versitygw (https://github.com/versity/versitygw) with its
// posix backend, a single static binary that serves a bucket per directory.
// hack/build-s3server.sh builds it into a cache directory outside the repo.
package s3server

import (
	_ "github.com/versity/versitygw/cmd/versitygw"
)
