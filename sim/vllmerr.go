package sim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvlens/kvlens/apierror"
	"github.com/kvlens/kvlens/tokenizer"
)

// validationError is a request refused as vLLM refuses it with its
// VLLMValidationError: the error names the field at fault, which vLLM
// answers in the error's param, and its text ends with that field and the
// value refused, as vLLM prints the exception ("max_tokens must be at
// least 1, got 0. (parameter=max_tokens, value=0)").
type validationError struct {
	msg   string
	param string // the request field at fault
	value string // the value refused, as Python prints it; "" for none
}

func (e *validationError) Error() string {
	if e.value == "" {
		return fmt.Sprintf("%s (parameter=%s)", e.msg, e.param)
	}
	return fmt.Sprintf("%s (parameter=%s, value=%s)", e.msg, e.param, e.value)
}

// writeErr answers err with status in vLLM's error shape, with its param
// when err is a *validationError.
func writeErr(w http.ResponseWriter, status int, err error) {
	var v *validationError
	if errors.As(err, &v) {
		apierror.WriteParam(w, status, err.Error(), v.param)
		return
	}
	writeError(w, status, err.Error())
}

// pyFloat formats f as Python's str does a float, which vLLM's messages
// print: 3.0 where Go prints 3, exponents from 1e+16 and below 1e-04.
func pyFloat(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // shortest digits, as Python's repr
	_, exp, _ := strings.Cut(e, "e")
	if x, _ := strconv.Atoi(exp); x < -4 || x >= 16 {
		return e // Go and Python both write at least two exponent digits
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// tooManyOutputTokens refuses a cap on the answer larger than the model's
// whole context, maxModelLen, in vLLM's words (its renderer's
// TokenizeParams, a missing space and all); param is the field that set
// the cap.
func tooManyOutputTokens(param string, maxTokens, maxModelLen int) error {
	return &validationError{
		msg:   fmt.Sprintf("%s=%dcannot be greater than max_model_len=max_total_tokens=%d. Please request fewer output tokens.", param, maxTokens, maxModelLen),
		param: param, value: strconv.Itoa(maxTokens),
	}
}

// contextError words a prompt refused for the context length as vLLM's
// renderer does, keeping any other error as it is. maxOut is the answer's
// cap the request set (0 for none), maxModelLen the context: the prompt
// may have maxModelLen-maxOut tokens. A prompt refused on its bytes alone
// is vLLM's refusal by characters, counted here in bytes; one refused
// while tokenizing reports one token past the limit, where vLLM's
// tokenizer stops; a prompt of token ids reports its exact length.
func contextError(err error, maxOut, maxModelLen int) error {
	var tl *tokenizer.TooLongError
	if !errors.As(err, &tl) {
		return err
	}
	maxIn := maxModelLen - maxOut
	if tl.Bytes > 0 {
		return &validationError{
			msg: fmt.Sprintf("You passed %d input characters and requested %d output tokens. However, the model's context length is only %d tokens, resulting in a maximum input length of %d tokens (at most %d characters). Please reduce the length of the input prompt.",
				tl.Bytes, maxOut, maxModelLen, maxIn, maxIn*tokenizer.MaxTokenBytes),
			param: "input_text", value: strconv.Itoa(tl.Bytes),
		}
	}
	n := tl.AtLeast
	if !tl.Counted {
		n = maxIn + 1
	}
	return &validationError{
		msg: fmt.Sprintf("You passed %d input tokens and requested %d output tokens. However, the model's context length is only %d tokens, resulting in a maximum input length of %d tokens. Please reduce the length of the input prompt.",
			n, maxOut, maxModelLen, maxIn),
		param: "input_tokens", value: strconv.Itoa(n),
	}
}
