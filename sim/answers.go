package sim

// The bodies a simulated worker answers with, in vLLM's shapes: the fields
// vLLM's OpenAI server sends that a client may read, with null where vLLM
// has nothing to say. go-openai's response types are not used: they add
// fields vLLM never sends (content_filter_results, audio_tokens).

// usage is vLLM's usage block. prompt_tokens_details.cached_tokens is what
// vLLM reports with --enable-prompt-tokens-details, the prefix-cache hits
// kvlens's load generator and router read.
type usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// chatAnswer is vLLM's chat.completion.
type chatAnswer struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"` // always null: none are asked for
	FinishReason string      `json:"finish_reason"`
	StopReason   *string     `json:"stop_reason"` // null: no stop string or token ended it
}

type chatMessage struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolCalls []any  `json:"tool_calls"` // always empty
}

// textAnswer is vLLM's text_completion.
type textAnswer struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type textChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

// modelCard is one entry of vLLM's GET /v1/models, with max_model_len: the
// longest prompt plus output, in tokens, which a router reads to refuse
// over-long prompts itself.
type modelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
}
