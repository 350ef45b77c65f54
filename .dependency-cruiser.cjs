/**
 * The layer rule (issue 24): a module imports only from its own layer or the layers below it, in this order,
 * and a worker process never loads the GraphQL or HTTP layers or the contracts. `npm test` runs it.
 */
const LAYERS = [
  ['bin'],
  ['http'],
  ['graph'],
  ['contracts', 'identity', 'idempotency'],
  ['jobs'],
  ['catalog'],
  ['data'],
  ['db'],
  ['kernel'],
];

const folders = (layers) => `^src/(${layers.flat().join('|')})/`;

const upward = LAYERS.slice(1).map((layer, index) => ({
  name: `${layer.join('-')}-looks-down`,
  comment: `${layer.join(', ')} may import only ${LAYERS.slice(index + 1)
    .flat()
    .join(', ')} (and generated/)`,
  severity: 'error',
  from: { path: folders([layer]) },
  to: { path: folders(LAYERS.slice(0, index + 1)) },
}));

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'worker-loads-no-graph',
      comment: 'A worker process runs jobs only: it never loads graph/, http/ or contracts/ (directly or not).',
      severity: 'error',
      from: { path: '^src/bin/worker\\.ts$' },
      to: { path: '^src/(graph|http|contracts)/', reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
