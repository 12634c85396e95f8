// corrald's streams are NDJSON: one JSON event per line, each with `seq`, ending with exactly one
// final event (`exit` or `error`).

/** Parses a byte stream of NDJSON lines into objects, one per line. */
export async function* parseNdjson<T = unknown>(source: AsyncIterable<Uint8Array>): AsyncGenerator<T> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of source) {
    pending += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      if (line.trim()) yield JSON.parse(line) as T;
    }
  }
  pending += decoder.decode();
  if (pending.trim()) yield JSON.parse(pending) as T;
}

/** An async iterable as a web ReadableStream (pulls one item per read). */
export function iterableToStream<T>(iterable: AsyncIterable<T>, onCancel?: () => void): ReadableStream<T> {
  const iterator = iterable[Symbol.asyncIterator]();
  return new ReadableStream<T>({
    async pull(controller) {
      try {
        const next = await iterator.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      } catch (err) {
        controller.error(err);
      }
    },
    async cancel() {
      onCancel?.();
      await iterator.return?.();
    },
  });
}
