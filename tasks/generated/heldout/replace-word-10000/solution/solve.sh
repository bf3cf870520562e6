#!/bin/bash
sed -i 's/\bbreeze\b/thunder/g' /app/batch.log
