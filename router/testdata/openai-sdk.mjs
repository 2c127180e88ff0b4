// Drives kvlens's router with OpenAI's own Node SDK, as a client kvlens did
// not write would: node openai-sdk.mjs OK_URL CUT_URL BUSY_URL, each a base
// URL ending in /v1. It prints what the SDK returned or raised in each case,
// as JSON; router/sdk_test.go judges it.
import OpenAI from "openai";

const [okURL, cutURL, busyURL] = process.argv.slice(2);
const client = (baseURL) => new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const ok = client(okURL);
const model = (await ok.models.list()).data[0].id;
const question = [{ role: "user", content: "Explain KV caching in two sentences." }];

// raised records what the SDK threw, by its error class.
const raised = (e) => ({ raised: e.constructor.name, status: e.status ?? null, message: String(e.message) });

async function streamed(c, messages) {
  const s = await c.chat.completions.create({
    messages, stream: true, stream_options: { include_usage: true }, max_tokens: 24,
    model,
  });
  let text = "", usage = null, chunks = 0;
  for await (const chunk of s) {
    chunks++;
    text += chunk.choices?.[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, usage, chunks };
}

const cases = {
  async models() {
    const page = await ok.models.list();
    return { ids: page.data.map((m) => m.id) };
  },
  async stream() {
    const first = await streamed(ok, question);
    const next = await streamed(ok, [...question, { role: "assistant", content: first.text }, { role: "user", content: "And why does routing matter?" }]);
    return { first, next };
  },
  async whole() {
    const r = await ok.chat.completions.create({ model, messages: question, max_tokens: 24 });
    return { content: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage };
  },
  async completion() {
    const r = await ok.completions.create({ model, prompt: "The KV cache", max_tokens: 8 });
    return { text: r.choices[0].text, usage: r.usage };
  },
  async unknownModel() {
    await ok.chat.completions.create({ model: "gpt-4", messages: question, max_tokens: 4 });
    return {};
  },
  async imagePart() {
    await ok.chat.completions.create({
      model, max_tokens: 4,
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "http://example.invalid/a.png" } }] }],
    });
    return {};
  },
  async cutStream() {
    const r = await streamed(client(cutURL), question);
    return { text: r.text, chunks: r.chunks };
  },
  async busyWorker() {
    await client(busyURL).chat.completions.create({ model, messages: question, max_tokens: 4 });
    return {};
  },
};

const out = {};
for (const [name, run] of Object.entries(cases)) {
  try {
    out[name] = await run();
  } catch (e) {
    out[name] = raised(e);
  }
}
console.log(JSON.stringify(out));
