/**
 * A loop's pause between polls that a notification ends early. A notification that arrives while the loop is busy
 * is kept, so the next pause returns at once and no wake-up is lost between a poll and the following sleep.
 */
export interface Waker {
  notify(): void;
  sleep(): Promise<void>;
}

export function createWaker(pollMs: number): Waker {
  let woken = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    woken = true;
    wake?.();
  };
  const sleep = () =>
    new Promise<void>((resolve) => {
      if (woken) {
        woken = false;
        resolve();
        return;
      }
      const timer = setTimeout(() => {
        wake = null;
        resolve();
      }, pollMs);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        woken = false;
        resolve();
      };
    });
  return { notify, sleep };
}
