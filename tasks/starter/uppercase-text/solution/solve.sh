#!/bin/bash
tr a-z A-Z < /app/in.txt > /app/out.txt
