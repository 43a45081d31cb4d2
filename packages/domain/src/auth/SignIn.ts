/** The sign-in rules (decisions.md, "Authentication endpoints"; README, "Sign up, sign in"). */

/**
 * Failed sign-ins allowed per email and per client address within a window before sign-ins are
 * answered 429 until the window frees.
 */
export const SignInThrottle = {
  perEmail: [{ limit: 10, seconds: 900 }],
  perAddress: [{ limit: 100, seconds: 900 }]
} as const
