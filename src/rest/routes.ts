import type { Route } from './route.ts';
import { orgRoutes } from './routes/orgs.ts';
import { preferenceRoutes } from './routes/preferences.ts';

/** Every /v1 route. A new domain adds its declarations file under routes/ and one entry here. */
export const routes: readonly Route[] = [...preferenceRoutes, ...orgRoutes];
