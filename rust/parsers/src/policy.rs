//! Policies: what the parsers do where peer servers disagree, and why.
//!
//! The peers are vLLM, SGLang, SMG and llama.cpp (with vllm-mlx and openai/harmony where they
//! test a format). Where they agree, smgpy does the same; where they differ, it takes the
//! majority or the model's own reference parser, and the table below says so. The fixtures that
//! pin each row are in `tests/tool_common/peers.rs`, `tests/harmony.rs` and
//! `tests/reasoning_peers.rs`, each with the peer test it was transcribed from.
//!
//! # Calls that never complete (truncation)
//!
//! A **complete parse** reports a tool region as calls only if it reads whole. When the output
//! ends inside a region (cut at `max_tokens`, no end marker), the region is calls only if every
//! call's arguments closed and nothing but whitespace follows them; a missing end marker after
//! that is tolerated, since it is often a stop token the server cut (vLLM's Hermes parser,
//! llama.cpp's gpt-oss parser). Otherwise the region's text, verbatim, is normal text and none of
//! its calls are reported: SMG, vLLM's Hermes parser and llama.cpp's final (non-partial) parse
//! all return the text of a call cut off inside its arguments; vLLM's Kimi and Qwen3-Coder
//! parsers and llama.cpp's partial mode report a partial call instead. A call's arguments are
//! never closed up into valid JSON as if the call were whole.
//!
//! A **stream** cannot take back a call it started: the name and the argument fragments so far
//! were sent. When the output ends inside that call's arguments, or its arguments break
//! (invalid JSON, a malformed parameter), the stream sends nothing more for it (the arguments stop
//! where the valid text stopped) and lists the call in [`crate::tool::Abandoned`]
//! (`ToolCallParser::abandoned`), with the region's text where a complete parse has it.
//! `Abandoned::apply` turns what a stream accumulated into the complete parse, so streaming equals
//! complete for every output (the property tests check exactly that). The server reports
//! `finish_reason: "length"` when `max_tokens` cut the output.
//!
//! # Differences from peers
//!
//! | Case | smgpy | Peers | Why |
//! |---|---|---|---|
//! | Output ends inside a call | text (complete); abandoned call (stream) | SMG, vLLM Hermes, llama.cpp final parse: text. vLLM Kimi / Qwen3-Coder, llama.cpp partial: partial call | majority; a partial call looks whole to a client |
//! | Arguments complete, end marker missing | call | vLLM Hermes, llama.cpp gpt-oss: call | end markers are often stop tokens |
//! | Arguments that break after the call started streaming | call abandoned; its region is text if no sibling completed | vLLM Kimi, Harmony: call kept with raw arguments; SMG: call skipped | a stream cannot take back the start; a complete parse must not invent a whole call |
//! | One malformed call among several (bad JSON, empty or unreadable name, non-finite number) | skipped, siblings kept | SMG, vLLM pythonic and Qwen3-Coder: skipped. vLLM Kimi: kept raw | majority; "one bad call must not swallow its siblings" |
//! | End marker inside a JSON string | not an end | SMG (Cohere): not an end | the JSON is still open; only JSON bodies track strings (XML and Python text has stray quotes) |
//! | Text after the calls | kept as normal text | vLLM, llama.cpp, SGLang pythonic: kept. SMG, SGLang gpt-oss: dropped | nothing the model wrote is lost |
//! | Whitespace before a call | kept verbatim | vLLM: kept. SMG (DSML): trimmed. vLLM ERNIE: trimmed | text is never rewritten |
//! | Python call list after prose (`Let me check: [f(x=1)]`) | calls | SMG, SGLang: calls. vLLM: text (anchored at the start) | Llama 4 writes it; a `[` opens a call only before `NAME(` |
//! | XML value whitespace | Qwen3-Coder / Seed-OSS: one newline each side. MiniMax M2, GLM: all | vLLM Qwen3-Coder (= Qwen's reference): one newline. llama.cpp, SMG: all | each model's own reference parser |
//! | XML value without a schema | text (Qwen3-Coder, Seed-OSS, MiniMax M2); JSON-or-literal (GLM, Step-3) | vLLM, SGLang (reference parsers): text. SMG: typed | each model's own reference parser |
//! | `null` for a `string`-typed XML parameter | the string `"null"` | Qwen's original reference: null. Newer vLLM: `"null"` | a string schema always means text, and it streams as text |
//! | DSML `string="true"` on a parameter the schema types | the schema's type wins | vLLM: schema wins | vLLM's tests |
//! | DeepSeek V4 vs V3.2 block names | each reads only its own | vLLM, SMG: same | the formats are distinct |
//! | Kimi id without `:N` (`functions.x.0`) | call skipped | vLLM: skipped | vLLM's tests |
//! | Kimi bare counter id (`0`) | named after the one declared tool, else skipped | vLLM: also infers from argument keys among several | inferring from keys guesses |
//! | Call to an undeclared tool (`tools` given) | the region stays text | vLLM, SGLang: reported anyway | a client cannot run it |
//! | Tool call opened inside `<think>` | ends reasoning; the call reaches the tool parser | SGLang (Qwen3, GLM, Kimi, Hunyuan): same. llama.cpp, SMG: stays reasoning | models do open calls there (issue class 8) |
//! | `kimi_k2`, `glm47` reasoning without `<think>` | reasoning (implied open) | vLLM: implied. SGLang: per flag | their templates open the block |
//! | Harmony preamble (commentary, no recipient) | content | llama.cpp, SGLang: content. vLLM: content only without a final. SMG: reasoning | it is addressed to the user |
//! | Harmony analysis messages | concatenated reasoning; never content, even in the tool parser alone | SGLang, vllm-mlx, llama.cpp: concatenated. SMG: last one only | nothing lost |
//! | Harmony built-in tool call (`to=browser.search`, `to=python`) | hidden | vLLM: ignored. SGLang: tool event. SMG: reasoning | the server's tool, not the client's |
//! | Harmony namespaced recipient (`to=api.users.create`) | call `create` | sgl-router: last part. vLLM: only `functions.` | the only peer test |
//! | Harmony arguments that are not JSON (`foo`, empty) | kept raw (`foo`, `""`) | vLLM, vllm-mlx, SMG: raw | majority |
//! | Harmony tool call, reasoning parser alone | hidden; with a tool parser behind (`keep_tool_calls`, the server's pipeline) handed over in the content | vllm-mlx: hidden. SGLang: in normal text | neither leaks markup, both keep the call |
//! | Harmony newlines before a terminator | dropped | vllm-mlx: trimmed | formatting, not text |
//! | Harmony `<|call|>` inside a call's JSON string | the reasoning parser ends the message there; the tool parser alone reads on | — | it is a special token; in text it is ambiguous |
//!
//! # Formats added for peers, and those left out
//!
//! Added: `deepseek_v4` (split from `deepseek_v32`), `command_r` (Command R / R+ `Action:` with a
//! fenced JSON list), `generic` (llama.cpp's JSON envelope), `firefunction_v2` (the `functools[`
//! grammar), Llama 3.1's `<function=NAME>{..}</function>` and `<|python_tag|>NAME.call(..)`
//! (in `llama3_json`), LFM2's JSON lists, Gemma 4's bare `call:`, `<call>`, `<turn|>`-closed,
//! paren and ```` ```tool_code ```` forms; reasoning `glm47`, `apertus`. Aliases: `deepseekv4`,
//! `hunyuan`, `interns1`, `apertus2509`, SGLang's hyphenated names (`minimax-m2`,
//! `minimax-append-think`), reasoning `nemotron_3`, `mimo`, `telechat4`, `poolside_v1`, `holo2`.
//!
//! Left out, each for a stated reason: MiniMax M3 tool calls (nested XML whose arrays and objects
//! follow the schema: not yet), MiniCPM5 XML, K2 "horizon", GigaChat 3.5, Solar Open 2, and the
//! names SGLang or vLLM list without a test this crate could check (`dots`, `trinity`, `ling3`,
//! `spark25`, `muse`, `cwm`, `pangu`, `plamo3`, `rwkv`, `step_deepresearch`, `granite_pythonic`):
//! their formats were not verified, and a guessed alias would parse them wrongly. llama.cpp's
//! Hermes leniency (`<tool>`, `<response>`, fenced or bare JSON) is not accepted: prose JSON would
//! turn into calls. SGLang's gpt-oss text strategy (special tokens stripped, `analysis...
//! assistantfinal`) is not read: plain text starting with "analysis" would become reasoning.
