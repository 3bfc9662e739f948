import { describe, expect, it } from 'vitest';
import { CONNECTIONS_CHECKED, ConnectionShares, type SharedConnection } from '../../../src/proxy/connection-shares.js';

/**
 * silent: connected, nothing sent; head: its first request head arriving; used: kept alive after
 * serving requests, nothing in flight; request: a request in flight.
 */
type State = 'silent' | 'head' | 'used' | 'request';

/** A connection in one of the states admission tells apart; counts how often it was looked at. */
class FakeConnection implements SharedConnection {
  looks = 0;
  wasCut = false;
  constructor(
    readonly name: string,
    private readonly state: State,
    private readonly shares: ConnectionShares<FakeConnection>,
    private readonly peer: string,
  ) {}
  get silent(): boolean {
    this.looks++;
    return this.state === 'silent';
  }
  get unused(): boolean {
    return this.state === 'silent' || this.state === 'head';
  }
  cut(): void {
    this.wasCut = true;
    this.shares.remove(this.peer, this);
  }
}

function open(shares: ConnectionShares<FakeConnection>, peer: string, states: State[]): FakeConnection[] {
  return states.map((state, i) => {
    expect(shares.admit(peer).admitted).toBe(true);
    const connection = new FakeConnection(`${peer}#${i}`, state, shares, peer);
    shares.add(peer, connection);
    return connection;
  });
}

describe('ConnectionShares: who may open one more connection', () => {
  it('admits every peer below max_connections, and one peer up to the whole limit by default', () => {
    const shares = new ConnectionShares<FakeConnection>(4, 4);
    open(shares, 'a', ['silent', 'silent', 'silent', 'silent']);
    expect(shares.admit('a')).toEqual({ admitted: false, limit: 'connections' });
  });

  it('refuses a peer at max_connections_per_client while the listener has room', () => {
    const shares = new ConnectionShares<FakeConnection>(10, 2);
    open(shares, 'a', ['request', 'request']);
    expect(shares.admit('a')).toEqual({ admitted: false, limit: 'connections_per_client' });
    expect(shares.admit('b')).toEqual({ admitted: true });
  });

  it('at the limit, closes a silent connection of the heaviest peer before one whose first head is arriving, never one with a request', () => {
    const shares = new ConnectionShares<FakeConnection>(6, 6);
    const a = open(shares, 'a', ['request', 'head', 'silent', 'request']);
    open(shares, 'b', ['request', 'request']);
    const first = shares.admit('c');
    expect(first).toMatchObject({ admitted: true, replaced: { peer: 'a', held: 4 } });
    expect(a.filter((c) => c.wasCut).map((c) => c.name)).toEqual(['a#2']);
    open(shares, 'c', ['request']);
    // a: request, head, request (3); b: 2; c: 1. A newcomer of d (0) takes a's head-arriving one.
    expect(shares.admit('d')).toMatchObject({ admitted: true, replaced: { peer: 'a', held: 3 } });
    expect(a.filter((c) => c.wasCut).map((c) => c.name)).toEqual(['a#1', 'a#2']);
    open(shares, 'd', ['request']);
    // Every connection left carries a request: nothing is cut, the newcomer is refused.
    expect(shares.admit('e')).toEqual({ admitted: false, limit: 'connections' });
  });

  it('does not move a connection between peers whose shares differ by one (no churn at an even split)', () => {
    const shares = new ConnectionShares<FakeConnection>(3, 3);
    open(shares, 'a', ['silent', 'silent']);
    open(shares, 'b', ['silent']);
    expect(shares.admit('b')).toEqual({ admitted: false, limit: 'connections' });
    expect(shares.admit('c')).toMatchObject({ admitted: true, replaced: { peer: 'a' } });
  });

  it('looks at a bounded number of connections per admission, and finds silent ones hidden behind more busy ones than that', () => {
    const shares = new ConnectionShares<FakeConnection>(300, 300);
    const busy = open(shares, 'a', Array.from({ length: 2 * CONNECTIONS_CHECKED }, () => 'request' as const));
    const hidden = open(shares, 'a', Array.from({ length: 300 - 2 * CONNECTIONS_CHECKED }, () => 'silent' as const));
    const outcomes: string[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const lookedBefore = [...busy, ...hidden].reduce((sum, c) => sum + c.looks, 0);
      const decision = shares.admit('b');
      const looked = [...busy, ...hidden].reduce((sum, c) => sum + c.looks, 0) - lookedBefore;
      expect(looked).toBeLessThanOrEqual(CONNECTIONS_CHECKED);
      outcomes.push(decision.admitted ? 'replaced' : decision.limit);
    }
    // The first two searches meet only busy connections (and move them to the back); the third finds a silent one.
    expect(outcomes).toEqual(['connections', 'connections', 'replaced']);
    expect(busy.some((c) => c.wasCut)).toBe(false);
  });

  // Security review: a kept-alive connection looked idle to tokentap while its client had just written
  // a POST, unread yet; closing it to admit another peer reset the POST (30 of 30).
  it('never closes a kept-alive connection that served requests, even idle: its client may have sent the next request a moment ago', () => {
    const shares = new ConnectionShares<FakeConnection>(3, 3);
    const a = open(shares, 'a', ['used', 'used', 'used']);
    expect(shares.admit('b')).toEqual({ admitted: false, limit: 'connections' });
    expect(a.some((c) => c.wasCut)).toBe(false);
  });

  it('keeps the heaviest peer\'s count as connections open and close', () => {
    const shares = new ConnectionShares<FakeConnection>(5, 5);
    const a = open(shares, 'a', ['silent', 'silent', 'silent']);
    open(shares, 'b', ['request', 'request']);
    // a holds 3 = 0 + 2 + 1: a newcomer may take one of a's.
    expect(shares.admit('c')).toMatchObject({ admitted: true, replaced: { peer: 'a', held: 3 } });
    shares.add('c', new FakeConnection('c#0', 'request', shares, 'c'));
    // a 2, b 2, c 1: a and b hold two more than a newcomer's 0.
    expect(shares.admit('d')).toMatchObject({ admitted: true, replaced: { peer: 'a', held: 2 } });
    shares.add('d', new FakeConnection('d#0', 'request', shares, 'd'));
    // a 1 (silent), b 2 (busy), c 1, d 1: the heaviest is b with 2, all busy: refused.
    expect(shares.admit('e')).toEqual({ admitted: false, limit: 'connections' });
    expect(a.filter((c) => c.wasCut)).toHaveLength(2);
  });
});
