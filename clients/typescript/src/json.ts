// JSON without losing integers above 2^53.
//
// The server writes 64-bit integers (a sequence's `max` is 2^63-1 by default)
// as JSON numbers in its descriptive answers; `JSON.parse` would round them.
// `parse` reads every integer that is not a safe JavaScript integer as a
// `bigint`, and everything else as `JSON.parse` does. `stringify` writes
// `bigint`s as plain JSON integers.

/** A parsed JSON value: integers outside the safe range are `bigint`s. */
export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  parse(): Json {
    const v = this.value();
    this.ws();
    if (this.i !== this.s.length) this.fail("unexpected text after the value");
    return v;
  }

  private fail(what: string): never {
    throw new SyntaxError(`invalid JSON at offset ${this.i}: ${what}`);
  }

  private ws(): void {
    const s = this.s;
    let c = s.charCodeAt(this.i);
    while (c === 32 || c === 10 || c === 13 || c === 9) c = s.charCodeAt(++this.i);
  }

  private value(): Json {
    this.ws();
    const c = this.s[this.i];
    switch (c) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.word("true", true);
      case "f":
        return this.word("false", false);
      case "n":
        return this.word("null", null);
      default:
        if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
        return this.fail(c === undefined ? "unexpected end" : `unexpected ${JSON.stringify(c)}`);
    }
  }

  private word<T extends Json>(w: string, v: T): T {
    if (this.s.startsWith(w, this.i)) {
      this.i += w.length;
      return v;
    }
    return this.fail(`expected ${w}`);
  }

  private number(): number | bigint {
    const m = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = this.i;
    const r = m.exec(this.s);
    if (!r) return this.fail("bad number");
    this.i = m.lastIndex;
    const text = r[0];
    const n = Number(text);
    if (r[1] === undefined && r[2] === undefined && !Number.isSafeInteger(n)) return BigInt(text);
    return n;
  }

  private string(): string {
    // Find the closing quote, then let JSON.parse decode the escapes.
    const s = this.s;
    let j = this.i + 1;
    for (;;) {
      const c = s.charCodeAt(j);
      if (Number.isNaN(c)) this.fail("unterminated string");
      if (c === 34) break;
      j += c === 92 ? 2 : 1;
    }
    const text = s.slice(this.i, j + 1);
    this.i = j + 1;
    return JSON.parse(text) as string;
  }

  private array(): Json[] {
    this.i++;
    const out: Json[] = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === "]") return out;
      if (c !== ",") this.fail("expected , or ]");
    }
  }

  private object(): { [key: string]: Json } {
    this.i++;
    const out: { [key: string]: Json } = {};
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail("expected a key");
      const k = this.string();
      this.ws();
      if (this.s[this.i++] !== ":") this.fail("expected :");
      Object.defineProperty(out, k, { value: this.value(), enumerable: true, writable: true, configurable: true });
      this.ws();
      const c = this.s[this.i++];
      if (c === "}") return out;
      if (c !== ",") this.fail("expected , or }");
    }
  }
}

/** Parses JSON text; integers that are not safe JavaScript integers become `bigint`s. */
export function parse(text: string): Json {
  return new Parser(text).parse();
}

/** `JSON.stringify`, with `bigint`s written as JSON integers. */
export function stringify(value: unknown): string {
  const marks: string[] = [];
  const tag = `\u0000big${Math.random().toString(36).slice(2)}:`;
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === "bigint") {
      marks.push(v.toString());
      return tag;
    }
    return v;
  });
  if (marks.length === 0) return text;
  let i = 0;
  const quoted = JSON.stringify(tag);
  return text.split(quoted).reduce((acc, part) => acc + marks[i++] + part);
}
