import { checkedFetch } from './contract.ts';

export interface StreamEvent {
  event: string;
  data: any;
  /** The frame's `id:` line, when it has one. */
  id?: string;
}

export interface EventStream {
  status: number;
  headers: Headers;
  /** The next event (comments skipped), or null when the server closed the stream. */
  next(): Promise<StreamEvent | null>;
  /** Comment lines (heartbeats) seen so far. */
  comments: string[];
  /** Reads until the server closes the stream; returns the events that were still to come. */
  rest(): Promise<StreamEvent[]>;
  close(): void;
}

/**
 * A server-sent event stream read frame by frame (WHATWG HTML §9.2 framing: blank-line separated, `event:`,
 * `data:` and `:` comment lines), so a test can react to each event before the next one exists.
 */
export async function openEventStream(url: string, init: RequestInit = {}): Promise<EventStream> {
  const abort = new AbortController();
  const response = await checkedFetch(url, { ...init, signal: abort.signal });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const comments: string[] = [];
  let buffer = '';
  let ended = false;

  async function nextFrame(): Promise<string | null> {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        return frame;
      }
      if (ended) return null;
      const chunk = await reader.read();
      if (chunk.done) ended = true;
      else buffer += chunk.value;
    }
  }

  async function next(): Promise<StreamEvent | null> {
    for (;;) {
      const frame = await nextFrame();
      if (frame === null) return null;
      let event = 'message';
      let id: string | undefined;
      const data: string[] = [];
      for (const line of frame.split('\n')) {
        if (line.startsWith(':')) comments.push(line.slice(1).trim());
        else if (line.startsWith('id:')) id = line.slice(3).trim();
        else if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length > 0) {
        const parsed = data.join('\n') === '' ? null : JSON.parse(data.join('\n'));
        return id === undefined ? { event, data: parsed } : { event, data: parsed, id };
      }
    }
  }

  return {
    status: response.status,
    headers: response.headers,
    next,
    comments,
    rest: async () => {
      const events: StreamEvent[] = [];
      for (let event = await next(); event; event = await next()) events.push(event);
      return events;
    },
    close: () => abort.abort(),
  };
}
