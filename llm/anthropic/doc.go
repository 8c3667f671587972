// Package anthropic is Fathom's client for the Anthropic Messages API
// (POST {BaseURL}/v1/messages) and the Anthropic-compatible endpoint of Fathom's own
// scripted mock-llm, built on the official Go SDK (github.com/anthropics/anthropic-sdk-go).
// Like llm/openai it has a timeout per call and a bound on the response size (streams
// included), and it does not retry (wrap it in llm/resilient for that). It is configured
// by Config alone (ConfigFromEnv reads ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_AUTH_TOKEN, FATHOM_MODEL and ANTHROPIC_MAX_TOKENS): the SDK's own
// environment defaults are not applied.
//
// # Mapping
//
// Fathom's provider-neutral conversation is translated to Anthropic's shape:
//
//   - system messages before the conversation become the top-level "system" string
//     (joined with a blank line); a system message after it (a step's task prompt)
//     becomes user text at its place, so that it does not change the cached prefix
//     before the history (the cache order is tools, system, messages);
//   - user and assistant messages become messages of content blocks; an assistant's
//     tool calls become "tool_use" blocks whose input is the parsed arguments object
//     (arguments that are not a JSON object are sent as {"_raw": "<text>"} so a broken
//     call from the model does not fail the whole request);
//   - tool messages become "tool_result" blocks of a user message;
//   - consecutive messages that end up with the same role are merged into one, since
//     the API requires user and assistant turns to alternate.
//
// Request options: ToolChoice "auto"/"required"/name become tool_choice auto/any/tool
// ("none" sends no tools); ParallelToolCalls becomes disable_parallel_tool_use;
// ResponseFormat becomes one more tool (listed first) whose input is returned as
// Response.Content: forced with tool_choice when it is the only tool, with tool_choice
// "any" beside other tools (the model calls a tool each turn, the answer tool to
// finish), only offered with extended thinking (the API forbids forcing a tool then); ThinkingBudget turns on extended thinking (max_tokens is raised above
// the budget when needed); PromptCache puts "ephemeral" cache_control breakpoints on the
// system prompt and at the end of the history: the last block before a task prompt, or
// without one the last block of the turn before the newest one.
// Thinking blocks of an answer come back in Response.Thinking and go out again, first
// in their assistant turn, from Message.Thinking. Usage.InputTokens includes
// cache_read_input_tokens (CachedInputTokens) and cache_creation_input_tokens
// (CacheWriteInputTokens). CountTokens asks the API for an exact input count.
//
// In the answer, text blocks are concatenated into Response.Content, tool_use blocks
// become Response.ToolCalls, and stop reasons are renamed to Fathom's (end_turn →
// "stop", tool_use → "tool_calls", max_tokens → "length", so Response.Truncated
// reports a cut answer; others pass through).
//
// # Errors and streaming
//
// A non-2xx answer is an *llm.APIError carrying the status, Anthropic's error type and
// message and the Retry-After wait, so llm.IsRetryable treats 429 and 5xx (including
// Anthropic's 529 overloaded) as retryable. When Request.OnDelta is set the answer is
// streamed as server-sent events; an "error" event becomes an *llm.APIError, and a
// stream that ends before "message_stop" is an error wrapping io.ErrUnexpectedEOF.
//
// # Example
//
//	c, err := anthropic.New(anthropic.Config{APIKey: os.Getenv("ANTHROPIC_API_KEY")})
//	if err != nil {
//		return err
//	}
//	resp, err := c.Chat(ctx, llm.Request{Messages: []llm.Message{
//		{Role: "system", Content: "Answer briefly."},
//		{Role: "user", Content: "What is an actor?"},
//	}})
package anthropic
