package access

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// TokenEnv is the environment variable an operator token can come from, as
// a Kubernetes Secret provides it.
const TokenEnv = "KVLENS_CONTROL_TOKEN"

// maxTokenFile bounds what a token file may hold, in bytes: a token is
// short, and a wrong path (a log, a disk image) must not be read whole.
const maxTokenFile = 4 << 10

// LoadToken picks the operator token from, in order: value (--control-token,
// which shows in the process list), the file at path (--control-token-file,
// such as a mounted Secret) and the environment variable TokenEnv, read with
// getenv. It returns "" when none is set, and says where the token came
// from, for the startup message. Giving both the flag and the file is an
// error; the environment is only a default.
func LoadToken(value, path string, getenv func(string) string) (token, source string, err error) {
	switch {
	case value != "" && path != "":
		return "", "", errors.New("access: give --control-token or --control-token-file, not both")
	case value != "":
		token, source = value, "--control-token"
	case path != "":
		token, source, err = readTokenFile(path)
		if err != nil {
			return "", "", err
		}
	case getenv(TokenEnv) != "":
		token, source = getenv(TokenEnv), "$"+TokenEnv
	default:
		return "", "", nil
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", "", fmt.Errorf("access: the operator token from %s is empty", source)
	}
	if strings.ContainsFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", "", fmt.Errorf("access: the operator token from %s contains spaces or control characters, which an Authorization header cannot carry", source)
	}
	return token, source, nil
}

func readTokenFile(path string) (string, string, error) {
	source := "--control-token-file " + path
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("access: --control-token-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", "", fmt.Errorf("access: --control-token-file: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", "", fmt.Errorf("access: --control-token-file %s: over %d bytes, not a token", path, maxTokenFile)
	}
	return string(b), source, nil
}
