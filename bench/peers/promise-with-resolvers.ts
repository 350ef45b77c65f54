/**
 * PostGraphile 5 declares Node ≥ 22; on this project's Node 20 the one thing it misses is `Promise.withResolvers`
 * (ES2024, Node 22), which grafserv calls per request. Imported first by the peer so both sides run on one Node.
 */
if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers<T>() {
      let resolve!: (value: T | PromiseLike<T>) => void;
      let reject!: (reason?: unknown) => void;
      const promise = new Promise<T>((onResolve, onReject) => {
        resolve = onResolve;
        reject = onReject;
      });
      return { promise, resolve, reject };
    },
  });
}
