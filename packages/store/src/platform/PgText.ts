export { pgJson, pgText } from "@burnbox/domain/platform/PgText"
