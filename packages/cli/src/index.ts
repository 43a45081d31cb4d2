export const name = "burnbox"
