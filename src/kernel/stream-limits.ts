import { randomUUID } from 'node:crypto';
import { DomainError } from './errors.ts';

/**
 * Open event streams, counted per credential and per org (docs/decisions/faults.md): by this process alone, or by
 * every process of the service through a shared count (`SharedStreamCounts`, Redis). Every kind of
 * stream (job events, change feeds) acquires a lease here before its first event and releases it when it ends; a
 * lease beyond either cap is refused with 429 RATE_LIMITED and Retry-After. While open, each (credential, org) pair
 * is re-checked every `recheckMs` by one of its streams' checks: a revoked credential or a removed member ends all of
 * that pair's streams, whose `revoked` then holds the error they end with.
 */
export interface StreamLimits {
  perCredential: number;
  perOrg: number;
  recheckMs: number;
}

/** Answers the error a stream must end with, or null while its caller may still read; throwing keeps it open. */
export type AuthorityCheck = () => Promise<DomainError | null>;

export interface StreamLease {
  /** Set once the stream's authority is gone; the stream sends it as its last event. */
  readonly revoked: DomainError | null;
  release(): void;
}

/** One stream as the shared count knows it: its caller, its org and a token of its own. */
export interface StreamKey {
  credential: string;
  org: string;
  token: string;
}

/**
 * The count of open streams shared by every process of the service (Redis with REDIS_URL). A stream is held there
 * under a lease that its process renews while the stream is open, so that the streams of a process that died free
 * their slots by themselves. Any method may throw while the store is unreachable.
 */
export interface SharedStreamCounts {
  /** Counts `stream` unless its credential or org is at its cap: answers the full scope, or null once counted. */
  take(stream: StreamKey, limits: StreamLimits): Promise<'credential' | 'org' | null>;
  renew(streams: readonly StreamKey[]): Promise<void>;
  give(stream: StreamKey): Promise<void>;
}

/** Whole seconds a refused client should wait: streams are long-lived, so a slot frees slowly. */
export const STREAM_RETRY_AFTER_SECONDS = 10;

class Lease implements StreamLease {
  revoked: DomainError | null = null;
  private released = false;

  constructor(
    readonly key: StreamKey,
    /** Whether the shared count holds this stream (false: counted in this process only, the store being down). */
    readonly shared: boolean,
    readonly group: string,
    readonly check: AuthorityCheck,
    readonly onRevoked: () => void,
    private readonly onRelease: (lease: Lease) => void,
  ) {}

  revoke(error: DomainError): void {
    if (this.revoked || this.released) return;
    this.revoked = error;
    this.onRevoked();
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.onRelease(this);
  }
}

export class StreamRegistry {
  private readonly byCredential = new Map<string, number>();
  private readonly byOrg = new Map<string, number>();
  private readonly groups = new Map<string, Set<Lease>>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private sharedDown = false;

  /**
   * With `sharedCounts`, the caps hold across every process that shares them; while that store cannot be reached,
   * each process counts its own streams against the same caps (reported once through `onSharedDown`).
   */
  constructor(
    private readonly limits: StreamLimits,
    private readonly sharedCounts?: SharedStreamCounts,
    private readonly onSharedDown: (error: unknown) => void = () => undefined,
  ) {}

  /**
   * A lease for one stream of `credential` (its type and id) in `org`; `onRevoked` wakes the stream so that it can
   * send `lease.revoked` and end. Throws RATE_LIMITED (429) when either cap is reached.
   */
  async acquire(credential: string, org: string, check: AuthorityCheck, onRevoked: () => void): Promise<StreamLease> {
    const key = { credential, org, token: randomUUID() };
    const shared = await this.takeShared(key);
    if (!shared) this.takeLocal(credential, org);
    this.byCredential.set(credential, (this.byCredential.get(credential) ?? 0) + 1);
    this.byOrg.set(org, (this.byOrg.get(org) ?? 0) + 1);
    const group = `${credential}\n${org}`;
    const lease = new Lease(key, shared, group, check, onRevoked, () => this.release(credential, org, lease));
    const members = this.groups.get(group) ?? new Set<Lease>();
    members.add(lease);
    this.groups.set(group, members);
    this.schedule();
    return lease;
  }

  /** How many streams are open: all of them, or one credential's. */
  open(credential?: string): number {
    if (credential !== undefined) return this.byCredential.get(credential) ?? 0;
    let count = 0;
    for (const members of this.groups.values()) count += members.size;
    return count;
  }

  /** Whether the shared count took the stream; throws RATE_LIMITED when it is full, false when it is unreachable. */
  private async takeShared(key: StreamKey): Promise<boolean> {
    if (!this.sharedCounts) return false;
    let full: 'credential' | 'org' | null;
    try {
      full = await this.sharedCounts.take(key, this.limits);
    } catch (error) {
      this.sharedUnavailable(error);
      return false;
    }
    this.sharedDown = false;
    if (full) throw refused(full, full === 'credential' ? this.limits.perCredential : this.limits.perOrg);
    return true;
  }

  private takeLocal(credential: string, org: string): void {
    if ((this.byCredential.get(credential) ?? 0) >= this.limits.perCredential) {
      throw refused('credential', this.limits.perCredential);
    }
    if ((this.byOrg.get(org) ?? 0) >= this.limits.perOrg) throw refused('org', this.limits.perOrg);
  }

  private sharedUnavailable(error: unknown): void {
    if (!this.sharedDown) this.onSharedDown(error);
    this.sharedDown = true;
  }

  private release(credential: string, org: string, lease: Lease): void {
    if (lease.shared) this.sharedCounts?.give(lease.key).catch((error) => this.sharedUnavailable(error));
    decrement(this.byCredential, credential);
    decrement(this.byOrg, org);
    const members = this.groups.get(lease.group);
    members?.delete(lease);
    if (members?.size === 0) this.groups.delete(lease.group);
    if (this.groups.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.renewShared();
      void this.recheck();
    }, this.limits.recheckMs);
    this.timer.unref();
  }

  /** Renews the shared leases of this process's open streams, whatever their authority checks are doing. */
  private renewShared(): void {
    if (!this.sharedCounts) return;
    const held = [...this.groups.values()].flatMap((members) =>
      [...members].filter((lease) => lease.shared).map((lease) => lease.key),
    );
    if (held.length > 0) this.sharedCounts.renew(held).catch((error) => this.sharedUnavailable(error));
  }

  /** One check per (credential, org) pair, not per stream; a check that fails (database down) changes nothing. */
  private async recheck(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(
        [...this.groups.values()].map(async (members) => {
          const first = members.values().next().value;
          if (!first) return;
          const error = await first.check().catch(() => null);
          if (error) for (const lease of [...members]) lease.revoke(error);
        }),
      );
    } finally {
      this.checking = false;
    }
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

function refused(scope: 'credential' | 'org', limit: number): DomainError {
  const whose = scope === 'credential' ? 'this credential' : 'this organisation';
  return new DomainError(
    'RATE_LIMITED',
    `Too many open event streams for ${whose} (at most ${limit}); close one or retry later.`,
    {
      details: { limit: 'event-streams', scope, max: limit },
      retryAfter: STREAM_RETRY_AFTER_SECONDS,
    },
  );
}
