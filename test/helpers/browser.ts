import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's headless Chromium (`apt-get install -y chromium`); browser tests are skipped only where it is missing. */
export const CHROMIUM = '/usr/bin/chromium';
export const chromiumAvailable = existsSync(CHROMIUM);

/** A browser with a fresh temporary profile that talks to nothing but the pages a test opens. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
