# The sample webhook receiver of deploy/compose (the e2e receiver, e2e/receiver).
# Build context: e2e/receiver.
FROM node:22.12.0-alpine3.20
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY receiver.js ./
# The image's "node" user, numeric.
USER 1000:1000
EXPOSE 3000
CMD ["node", "receiver.js"]
