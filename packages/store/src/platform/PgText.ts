export { pgText } from "@burnbox/domain/platform/PgText"
