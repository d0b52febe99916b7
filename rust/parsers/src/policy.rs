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
//! One rule for a complete parse and every chunking of the stream (`docs/parsers.md` has the
//! table). A call goes live as soon as its name and the start of its arguments are read, and a
//! stream cannot take back what it sent. So a call that went live and then was cut off (at
//! `max_tokens`) or whose arguments broke (invalid JSON, a malformed parameter) is a **partial
//! call**: its name and its arguments as far as they were valid, never closed up into JSON that
//! looks whole. The rest of its region is dropped. It is listed in
//! [`crate::tool::Abandoned`] (`ToolCallParser::abandoned`), which the server uses to report
//! `finish_reason: "length"` and incomplete items. A complete parse reports exactly the same:
//! it is the stream pushed whole. (vLLM's Kimi and Qwen3-Coder parsers and llama.cpp's partial
//! mode report partial calls too; SMG, vLLM's Hermes parser and llama.cpp's final parse give the
//! text back, which a client that streamed the call never sees.)
//!
//! A region cut off before any call went live is text, verbatim, unless every call in it reads
//! whole (a missing end marker is tolerated: it is often a stop token the server cut), in which
//! case the calls are reported and text after them is normal text. A GLM call cut off right
//! after a closed value is whole. Output that `tool_choice` forced (the `[{"name": ...` list)
//! and that was cut off before a call went live is neither calls nor content.
//!
//! # Differences from peers
//!
//! | Case | smgpy | Peers | Why |
//! |---|---|---|---|
//! | Output ends inside a call that went live | partial call, arguments as far as valid (complete and stream) | vLLM Kimi / Qwen3-Coder, llama.cpp partial: partial call. SMG, vLLM Hermes, llama.cpp final parse: text | a stream cannot take back a call it sent; complete must equal the stream |
//! | Output ends inside a call that never went live | text | SMG, vLLM: text | nothing was sent |
//! | Complete calls, end marker missing, text after them | calls, then the text | vLLM Hermes: text. Llama 3 `<|python_tag|>` peers: call | the call was sent whole |
//! | Arguments complete, end marker missing | call | vLLM Hermes, llama.cpp gpt-oss: call | end markers are often stop tokens |
//! | Arguments that break after the call started streaming | partial call, arguments up to the break | vLLM Kimi, Harmony: call kept with raw arguments; SMG: call skipped | a stream cannot take back the start; nothing is closed up |
//! | One malformed call among several (bad JSON, empty or unreadable name, non-finite number) | skipped, siblings kept; one that broke after going live stays partial | SMG, vLLM pythonic and Qwen3-Coder: skipped. vLLM Kimi: kept raw | "one bad call must not swallow its siblings" |
//! | Unreadable JSON left in a call region after its calls (a malformed sibling) | dropped | SMG, vLLM Cohere: the well-formed call only | it is markup, not text |
//! | End marker inside a JSON string | not an end | SMG (Cohere): not an end | the JSON is still open; only JSON bodies track strings (XML and Python text has stray quotes) |
//! | Text after the calls | kept as normal text | vLLM, llama.cpp, SGLang pythonic: kept. SMG, SGLang gpt-oss: dropped | nothing the model wrote is lost |
//! | Whitespace-only text before, between or after calls | not content | vLLM, SGLang: only the text before the first call, stripped | a `"\n"` content beside calls becomes an empty message in clients |
//! | Other text before a call | kept verbatim, whitespace included | vLLM: kept. SGLang, SMG (DSML), vLLM ERNIE: trimmed | text is never rewritten |
//! | Qwen3-Coder bare `<function=` (no `<tool_call>`) | a call only at the start of output | vLLM: anywhere. SGLang: never | a misspelled wrapper (`<too_call>`) is no call |
//! | DSML `string="false"` | JSON (`"celsius"` is `celsius`) | DeepSeek's encoding, vLLM | the mark says the text is JSON |
//! | Python call list after prose (`Let me check: [f(x=1)]`) | calls | SMG, SGLang: calls. vLLM: text (anchored at the start) | Llama 4 writes it; a `[` opens a call only before `NAME(` |
//! | XML value whitespace | Qwen3-Coder / Seed-OSS: one newline each side. MiniMax M2, GLM: all | vLLM Qwen3-Coder (= Qwen's reference): one newline. llama.cpp, SMG: all | each model's own reference parser |
//! | XML value without a schema | text (Qwen3-Coder, Seed-OSS, MiniMax M2); JSON-or-literal (GLM, Step-3) | vLLM, SGLang (reference parsers): text. SMG: typed | each model's own reference parser |
//! | `null` for a `string`-typed XML parameter | the string `"null"` | Qwen's original reference: null. Newer vLLM: `"null"` | a string schema always means text, and it streams as text |
//! | DSML `string="true"` on a parameter the schema types | the schema's type wins | vLLM: schema wins | vLLM's tests |
//! | DeepSeek V4 vs V3.2 block names | each reads only its own | vLLM, SMG: same | the formats are distinct |
//! | Kimi id without `:N` (`functions.x.0`) | call skipped | vLLM: skipped | vLLM's tests |
//! | Kimi bare counter id (`0`) | named after the one declared tool, else skipped | vLLM: also infers from argument keys among several | inferring from keys guesses |
//! | Call to an undeclared tool (`tools` given) | the region stays text | vLLM, SGLang: reported anyway | a client cannot run it |
//! | Reasoning markers after reasoning closed, with thinking disabled, or a close with no reasoning open | content, verbatim (Gemma 4 reopens its thought channel) | vLLM, SGLang, SMG: split at the first close only | they are the model's text |
//! | Nested opening marker inside reasoning | reasoning text | vLLM, SGLang, SMG | same |
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
